//! `scripts/setup`'s decisions, run against directory trees made here: `--plan ROOT` prints
//! the packages it would install when the system's files are those under ROOT. No root, no
//! apt and no server: only the script and a shell. PATH is a directory of this test's own, so
//! the tools the script looks for are exactly the ones each case puts there.
// A test may panic: that is how it fails. The module's own rules are for src/.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::arithmetic_side_effects
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Tree {
    root: PathBuf,
}

impl Tree {
    fn new(name: &str) -> Tree {
        let root = std::env::temp_dir().join(format!("trafikey-setup-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bin")).expect("temp tree");
        Tree { root }
    }

    fn file(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().expect("a parent")).expect("dirs");
        std::fs::write(&p, bytes).expect("write");
        p
    }

    /// A shared object as the loader sees its first bytes (the script checks the ELF magic).
    fn library(&self, rel: &str) -> PathBuf {
        self.file(rel, b"\x7fELF\x02\x01\x01\0 a library")
    }

    /// An executable file under the root, where a package puts it (found by path, not on PATH).
    fn executable(&self, rel: &str) {
        let p = self.file(rel, b"#!/bin/sh\n");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// A tool on this test's PATH: a shell script exiting with `code`.
    fn tool(&self, name: &str, code: i32) {
        let p = self.file(&format!("bin/{name}"), format!("#!/bin/sh\nexit {code}\n").as_bytes());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    fn plan_with(&self, mode: &str, env: &[(&str, &Path)]) -> Vec<String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/setup");
        let mut cmd = Command::new("/bin/bash");
        cmd.arg(script)
            .arg("--plan")
            .arg(&self.root)
            .arg(mode)
            .env_clear()
            .env("PATH", self.root.join("bin"));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run scripts/setup --plan");
        assert!(out.status.success(), "setup --plan failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
    }

    fn plan(&self, mode: &str) -> Vec<String> {
        self.plan_with(mode, &[])
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn wants(plan: &[String], pkg: &str) -> bool {
    plan.iter().any(|p| p == pkg)
}

#[test]
fn libclang_cpp_alone_is_not_the_libclang_bindgen_loads() {
    // Debian's libclang-cpp14 without libclang1-14: the machine the README's first command
    // failed on. The glob libclang-*.so.* matches this file; bindgen skips it.
    let t = Tree::new("cpp");
    t.library("usr/lib/llvm-14/lib/libclang-cpp.so.14");
    t.library("usr/lib/x86_64-linux-gnu/libclang-cpp.so.14");
    assert!(wants(&t.plan("run"), "libclang-dev"), "{:?}", t.plan("run"));
}

#[test]
fn each_name_bindgen_loads_is_found_where_it_looks() {
    for rel in [
        "usr/lib/llvm-14/lib/libclang.so.1",
        "usr/lib/llvm-14/lib/libclang.so",
        "usr/lib/x86_64-linux-gnu/libclang-14.so.1",
        "usr/lib/x86_64-linux-gnu/libclang-14.so",
        "usr/local/lib/libclang.so.18",
        "usr/local/llvm18/lib/libclang.so",
        "usr/lib64/libclang.so",
    ] {
        let t = Tree::new("names");
        t.library("usr/lib/llvm-14/lib/libclang-cpp.so.14");
        t.library(rel);
        assert!(!wants(&t.plan("run"), "libclang-dev"), "{rel} is what bindgen loads: {:?}", t.plan("run"));
    }
}

#[test]
fn a_file_that_is_no_library_or_lies_outside_the_search_does_not_count() {
    let t = Tree::new("fake");
    t.file("usr/lib/llvm-14/lib/libclang.so.1", b"INPUT ( a linker script )");
    assert!(wants(&t.plan("run"), "libclang-dev"), "not an ELF object");
    let t = Tree::new("far");
    t.library("opt/llvm/lib/libclang.so.1");
    t.library("usr/lib/llvm-14/lib/clang/14/lib/linux/libclang_rt.asan.so");
    assert!(
        wants(&t.plan("run"), "libclang-dev"),
        "outside the directories bindgen searches, or another name"
    );
}

#[test]
fn libclang_path_is_the_only_place_searched_when_set() {
    let t = Tree::new("env");
    t.library("usr/lib/llvm-14/lib/libclang.so.1");
    let only_cpp = t.library("custom/libclang-cpp.so.14");
    let dir = only_cpp.parent().expect("dir").to_path_buf();
    assert!(
        wants(&t.plan_with("run", &[("LIBCLANG_PATH", &dir)]), "libclang-dev"),
        "a directory with only libclang-cpp"
    );
    let good = t.library("custom/libclang-17.so.1");
    assert!(
        !wants(&t.plan_with("run", &[("LIBCLANG_PATH", &dir)]), "libclang-dev"),
        "a directory with a loadable one"
    );
    assert!(!wants(&t.plan_with("run", &[("LIBCLANG_PATH", &good)]), "libclang-dev"), "the file itself");
    assert!(
        wants(&t.plan_with("run", &[("LIBCLANG_PATH", &only_cpp)]), "libclang-dev"),
        "the cpp file itself"
    );
    let lib_dir = t.root.join("custom");
    assert!(
        !wants(&t.plan_with("run", &[("LD_LIBRARY_PATH", &lib_dir)]), "libclang-dev"),
        "LD_LIBRARY_PATH is searched"
    );
}

#[test]
fn tools_are_asked_for_only_when_missing() {
    let t = Tree::new("tools");
    t.library("usr/lib/llvm-14/lib/libclang.so.1");
    assert_eq!(t.plan("run"), ["gcc", "python3-pip", "redis-tools"], "an empty PATH");
    t.tool("cc", 0);
    t.tool("python3", 1); // a python3 whose `-m pip` fails
    t.tool("redis-cli", 0);
    assert_eq!(t.plan("run"), ["python3-pip"]);
    t.tool("python3", 0);
    assert!(t.plan("run").is_empty(), "{:?}", t.plan("run"));
    std::fs::remove_file(t.root.join("bin/redis-cli")).expect("rm");
    t.tool("valkey-cli", 0);
    assert!(t.plan("run").is_empty(), "valkey-cli serves as the CLI");
}

#[test]
fn the_test_mode_also_wants_debians_redis_server() {
    let t = Tree::new("old");
    t.library("usr/lib/llvm-14/lib/libclang.so.1");
    for tool in ["cc", "python3", "redis-cli"] {
        t.tool(tool, 0);
    }
    t.executable("usr/bin/chromium");
    t.executable("usr/bin/valgrind");
    assert!(t.plan("run").is_empty());
    assert_eq!(t.plan("test"), ["redis-server"]);
    t.tool("redis-server", 0); // on PATH is not where the suite runs it from
    assert_eq!(t.plan("test"), ["redis-server"]);
    t.executable("usr/bin/redis-server");
    assert!(t.plan("test").is_empty());
}

#[test]
fn the_test_mode_also_wants_debians_chromium() {
    let t = Tree::new("chromium");
    t.library("usr/lib/llvm-14/lib/libclang.so.1");
    for tool in ["cc", "python3", "redis-cli"] {
        t.tool(tool, 0);
    }
    t.executable("usr/bin/redis-server");
    t.executable("usr/bin/valgrind");
    assert!(t.plan("run").is_empty(), "the build needs none of them: {:?}", t.plan("run"));
    assert_eq!(t.plan("test"), ["chromium"], "no package for Node: scripts/node-path finds or fetches it");
    t.tool("chromium", 0); // on PATH is not where the bull-board test runs it from
    assert_eq!(t.plan("test"), ["chromium"]);
    t.file("usr/bin/chromium", b"#!/bin/sh\n"); // there, but not executable
    assert_eq!(t.plan("test"), ["chromium"]);
    t.executable("usr/bin/chromium");
    assert!(t.plan("test").is_empty(), "{:?}", t.plan("test"));
}

#[test]
fn the_test_mode_also_wants_valgrind() {
    let t = Tree::new("valgrind");
    t.library("usr/lib/llvm-14/lib/libclang.so.1");
    for tool in ["cc", "python3", "redis-cli"] {
        t.tool(tool, 0);
    }
    t.executable("usr/bin/redis-server");
    t.executable("usr/bin/chromium");
    assert!(t.plan("run").is_empty(), "the build does not need it: {:?}", t.plan("run"));
    assert_eq!(t.plan("test"), ["valgrind"]);
    t.file("usr/bin/valgrind", b"#!/bin/sh\n"); // there, but not executable
    assert_eq!(t.plan("test"), ["valgrind"]);
    t.executable("usr/bin/valgrind");
    assert!(t.plan("test").is_empty(), "{:?}", t.plan("test"));
}

/// `scripts/node-path --plan` with PATH holding only this tree's tools: `path` (use the Node
/// on PATH) or `wheel` (fetch the pinned one).
fn node_choice(t: &Tree) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/node-path");
    let out = Command::new("/bin/bash")
        .arg(script)
        .arg("--plan")
        .env_clear()
        .env("PATH", t.root.join("bin"))
        .output()
        .expect("run scripts/node-path --plan");
    assert!(out.status.success(), "node-path --plan failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A `node` on the tree's PATH that reports `version`.
fn node(t: &Tree, version: &str) {
    let p = t.file("bin/node", format!("#!/bin/sh\necho {version}\n").as_bytes());
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn the_package_tests_run_on_node_20_19_or_newer_with_npm() {
    let t = Tree::new("node");
    assert_eq!(node_choice(&t), "wheel", "no node");
    node(&t, "v22.3.0");
    assert_eq!(node_choice(&t), "wheel", "node without npm");
    t.tool("npm", 0);
    assert_eq!(node_choice(&t), "path", "a new enough node with npm is used as it is");
    for (v, want) in [
        ("v18.19.0", "wheel"),
        ("v20.18.3", "wheel"),
        ("v20.19.0", "path"),
        ("v21.0.0", "path"),
        ("v24.19.0", "path"),
        ("v100.1.1", "path"),
        ("garbage", "wheel"),
    ] {
        node(&t, v);
        assert_eq!(node_choice(&t), want, "node {v}");
    }
}
