//! What a command is to the host: its name, how it takes its keys and what it does with each,
//! its arguments as `COMMAND DOCS` and the reference page show them, its flags and ACL
//! categories, and the function that serves it. The commands themselves — the table — live
//! above the host, in `verbs`; registration is handed that table.

use crate::domain::Range;
use crate::errors::Refusal;
use crate::host::{drive, shape_only, ArgStr, Exec, Reply, Verb};
use crate::keyspace::Role;

pub type Run = for<'a> fn(&mut Exec<'a>, &'static Command) -> Result<Reply, Refusal>;
/// A command's argument shape alone (no server access): for tests and tools.
pub type ShapeFn = for<'a> fn(&[ArgStr<'a>]) -> Result<(), Refusal>;

/// How a command takes its keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `CMD numkeys key... arg...`: the FCALL convention, `numkeys` fixed per command.
    Keys,
    /// `CMD arg...`: no keys at all.
    Bare,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRole {
    Queue(Role),
    /// `{emq}:version`, exactly.
    Version,
    /// Any key at all (TRA.DROP's cache row): layout checks nothing but its presence.
    Any,
    /// A key of the call's queue whose role is any of these, as the caller names it (TRA.JOBS:
    /// any state set; TRA.CLEAN: a finished set). The verb reads which from `Exec::set`.
    OneOf(&'static [Role]),
}

impl From<Role> for KeyRole {
    fn from(r: Role) -> KeyRole {
        KeyRole::Queue(r)
    }
}

impl KeyRole {
    const COUNT: usize = Role::ALL.len() + 3;

    const fn index(self) -> usize {
        match self {
            KeyRole::Queue(r) => r as usize,
            KeyRole::Version => Role::ALL.len(),
            KeyRole::Any => Role::ALL.len().saturating_add(1),
            KeyRole::OneOf(_) => Role::ALL.len().saturating_add(2),
        }
    }
}

/// What a command does with the key at one position: its key spec, and so the ACL
/// permission the server demands for it (read for `Read`, write for the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spec {
    /// RO ACCESS: read only.
    Read,
    /// RW INSERT: adds, never reads or changes what is there.
    Insert,
    /// RW UPDATE: writes without reading (appends and trims, as XADD's own spec says).
    Append,
    /// RW ACCESS UPDATE: reads and changes, deletions included (a key spec names one of
    /// INSERT, UPDATE, DELETE; UPDATE is "any other write").
    Update,
    /// RW ACCESS DELETE: takes elements out and uses them.
    Take,
}

/// Keys after the declared ones, as many as the call says: `n key1 … keyn`, each a key of
/// this role of the call's queue (TRA.ADD's rows). Its key spec begins at `n` and reads the
/// count there (find-keys KEYNUM), so ACL and the server see every one of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tail {
    pub role: Role,
    pub spec: Spec,
    /// How many keys `n` may give (checked by the domain step, as an argument's range).
    pub count: Range,
}

/// One declared key position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub role: KeyRole,
    pub spec: Spec,
}

/// A key of the call's queue with this role.
pub const fn q(role: Role, spec: Spec) -> Slot {
    Slot { role: KeyRole::Queue(role), spec }
}

/// A command's declared keys, in order, and where each role stands among them — worked out
/// when the module is compiled, so a verb opens a key by its role at the cost of an index,
/// and a command that declared one role twice does not compile.
#[derive(Clone, Copy, Debug)]
pub struct Keys {
    slots: &'static [Slot],
    at: [u8; KeyRole::COUNT],
}

const ABSENT: u8 = u8::MAX;

impl Keys {
    /// Evaluated when the module is compiled (every `KEYS` is a `const`): an index or an
    /// assertion that failed here fails the build, never a call.
    #[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects, clippy::panic)]
    pub const fn of(slots: &'static [Slot]) -> Keys {
        let mut at = [ABSENT; KeyRole::COUNT];
        let mut i = 0;
        while i < slots.len() {
            let r = slots[i].role.index();
            assert!(at[r] == ABSENT, "a role declared twice");
            assert!(i < ABSENT as usize, "too many keys");
            at[r] = i as u8;
            i += 1;
        }
        Keys { slots, at }
    }

    /// The position of the key with this role.
    pub fn position(&self, role: KeyRole) -> Option<usize> {
        self.at.get(role.index()).copied().filter(|&i| i != ABSENT).map(usize::from)
    }
}

impl std::ops::Deref for Keys {
    type Target = [Slot];
    fn deref(&self) -> &[Slot] {
        self.slots
    }
}

impl IntoIterator for Keys {
    type Item = &'static Slot;
    type IntoIter = std::slice::Iter<'static, Slot>;
    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter()
    }
}

/// The type of a value argument, for `COMMAND DOCS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Str,
    Int,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A value: shown by its display name.
    Value(Ty),
    /// A word that stands for itself (`LIFO`, `PAUSE`).
    Word,
    /// One of these.
    OneOf(&'static [Arg]),
    /// These, in order.
    Block(&'static [Arg]),
}

/// One argument after the keys, as `COMMAND DOCS` lists it and the synopsis writes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arg {
    /// The argument's name in `COMMAND DOCS`.
    pub name: &'static str,
    /// What the synopsis shows for a value (`p` in `[PRIORITY p]`); the word itself for words.
    pub display: &'static str,
    /// The word before the value (`PRIORITY`), for options.
    pub token: Option<&'static str>,
    pub shape: Shape,
    pub optional: bool,
    pub multiple: bool,
    /// A numeric value's accepted values: the same constant the domain step checks it
    /// against, so tests read every edge from here.
    pub range: Option<Range>,
    /// A string the domain step bounds by `trafikey.max-payload` (data, a result, an error, a
    /// stack, OPTS, a bus payload, a log line), so tests take the config's every edge to it.
    pub payload: bool,
}

const fn arg(name: &'static str, display: &'static str, token: Option<&'static str>, shape: Shape) -> Arg {
    Arg { name, display, token, shape, optional: false, multiple: false, range: None, payload: false }
}

/// A required value.
pub const fn val(name: &'static str, ty: Ty) -> Arg {
    arg(name, name, None, Shape::Value(ty))
}

/// An option with a value: `[TOKEN display]`.
pub const fn opt(name: &'static str, token: &'static str, display: &'static str, ty: Ty) -> Arg {
    arg(name, display, Some(token), Shape::Value(ty)).optional()
}

/// A word that stands for itself, required where it stands.
pub const fn word(w: &'static str) -> Arg {
    arg(w, w, None, Shape::Word)
}

/// An option that is only its word: `[LIFO]`.
pub const fn flag(name: &'static str, w: &'static str) -> Arg {
    arg(name, w, None, Shape::Word).optional()
}

pub const fn one_of(name: &'static str, token: Option<&'static str>, alts: &'static [Arg]) -> Arg {
    arg(name, name, token, Shape::OneOf(alts))
}

pub const fn block(name: &'static str, token: Option<&'static str>, items: &'static [Arg]) -> Arg {
    arg(name, name, token, Shape::Block(items))
}

impl Arg {
    pub const fn optional(mut self) -> Arg {
        self.optional = true;
        self
    }

    /// An option that must be given (`GRACE ms`): shown without brackets.
    pub const fn required(mut self) -> Arg {
        self.optional = false;
        self
    }

    pub const fn multiple(mut self) -> Arg {
        self.multiple = true;
        self
    }

    /// The values it accepts (a number, or a `when` once resolved).
    pub const fn range(mut self, r: Range) -> Arg {
        self.range = Some(r);
        self
    }

    /// Bounded by `trafikey.max-payload`.
    pub const fn payload(mut self) -> Arg {
        self.payload = true;
        self
    }

    /// How the synopsis writes it: `[KEEP n]`, `FIXED|EXP`, `id token [id token ...]`.
    pub fn synopsis(&self) -> String {
        let body = match self.shape {
            Shape::Value(_) | Shape::Word => self.display.to_owned(),
            Shape::OneOf(alts) => {
                let words = alts.iter().all(|a| a.shape == Shape::Word && !a.optional);
                alts.iter().map(Arg::synopsis).collect::<Vec<_>>().join(if words { "|" } else { " | " })
            }
            Shape::Block(items) => items.iter().map(Arg::synopsis).collect::<Vec<_>>().join(" "),
        };
        let one = match self.token {
            Some(t) => format!("{t} {body}"),
            None => body,
        };
        match (self.optional, self.multiple) {
            (false, false) => one,
            (true, false) => format!("[{one}]"),
            (false, true) => format!("{one} [{one} ...]"),
            (true, true) => format!("[{one} [{one} ...]]"),
        }
    }
}

/// What a command does to the keyspace: its flags, ACL categories and fence follow from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Does {
    /// Reads only: `readonly`, `@read`.
    Read,
    /// Changes what is there: `write`, `@write`.
    Write,
    /// Adds data: `write deny-oom` (refused when the server is out of memory, so a full
    /// server still drains), `@write`.
    Create,
}

/// Who a command is for: the ACL category it joins, and whether it is fenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// The queue's commands: in the `emq` ACL category; the ones that write are fenced.
    Emq,
    /// The operator's: `admin deny-script`, `@admin @dangerous @slow`, outside `emq`, unfenced.
    Admin,
    /// Outside `emq` and unfenced: commands that serve any key or none (TRA.DROP,
    /// TRA.CAPABILITIES).
    Plain,
}

/// One command of the module, declared whole in its verb's file with [`Command::new`] and
/// the methods after it; every other fact (flags, ACL categories, the fence) follows.
#[derive(Clone, Copy)]
pub struct Command {
    pub name: &'static str,
    /// Capability tokens this command provides (none for the controls).
    pub tokens: &'static [&'static str],
    pub form: Form,
    /// The declared keys, in order; the verb opens each by its role.
    pub keys: Keys,
    /// A counted run of keys after them, if the command takes one.
    pub tail: Option<Tail>,
    /// The arguments after the keys.
    pub args: &'static [Arg],
    pub does: Does,
    /// O(1) or O(log N): `fast`, `@fast`.
    pub fast: bool,
    pub group: Group,
    /// Served while the server loads and from a stale replica (the version probes).
    pub anytime: bool,
    /// Publishes on its bus key's channel (`getchannels-api`).
    pub publishes: bool,
    /// Acts on jobs its caller holds: each job comes with the `token` its claim gave, and the
    /// verb checks the lease before it writes (`EMQLEASE`, or a code for that entry). Tests
    /// generate the holder cases for every such command from this fact.
    pub holder: bool,
    /// Whether the fence runs before the domain step: the `emq` commands that write.
    pub fenced: bool,
    pub summary: &'static str,
    pub complexity: &'static str,
    pub run: Run,
    /// The verb's argument shape alone.
    pub shape: ShapeFn,
}

impl Command {
    /// The command `name` that verb `V` serves: it reads, in the `emq` category, with keys
    /// (`CMD numkeys key... arg...`); the methods below say what else it is.
    pub const fn new<V: Verb>(name: &'static str) -> Command {
        Command {
            name,
            tokens: &[],
            form: Form::Keys,
            keys: Keys::of(&[]),
            tail: None,
            args: &[],
            does: Does::Read,
            fast: false,
            group: Group::Emq,
            anytime: false,
            publishes: false,
            holder: false,
            fenced: false,
            summary: "",
            complexity: "",
            run: drive::<V>,
            shape: shape_only::<V>,
        }
    }

    pub const fn tokens(mut self, tokens: &'static [&'static str]) -> Command {
        self.tokens = tokens;
        self
    }

    pub const fn keys(mut self, keys: Keys) -> Command {
        self.keys = keys;
        self
    }

    /// After the declared keys, `n` (within `count`) and n keys of `role` (each with the
    /// access `spec`).
    pub const fn tail(mut self, role: Role, spec: Spec, count: Range) -> Command {
        self.tail = Some(Tail { role, spec, count });
        self
    }

    /// `CMD arg...`: no keys at all.
    pub const fn bare(mut self) -> Command {
        self.form = Form::Bare;
        self
    }

    pub const fn args(mut self, args: &'static [Arg]) -> Command {
        self.args = args;
        self
    }

    const fn doing(mut self, does: Does) -> Command {
        self.does = does;
        self.fenced = matches!(self.group, Group::Emq) && !matches!(does, Does::Read);
        self
    }

    pub const fn writes(self) -> Command {
        self.doing(Does::Write)
    }

    pub const fn creates(self) -> Command {
        self.doing(Does::Create)
    }

    pub const fn fast(mut self) -> Command {
        self.fast = true;
        self
    }

    const fn grouped(mut self, group: Group) -> Command {
        self.group = group;
        self.fenced = matches!(group, Group::Emq) && !matches!(self.does, Does::Read);
        self
    }

    pub const fn admin(self) -> Command {
        self.grouped(Group::Admin)
    }

    pub const fn plain(self) -> Command {
        self.grouped(Group::Plain)
    }

    pub const fn anytime(mut self) -> Command {
        self.anytime = true;
        self
    }

    pub const fn publishes(mut self) -> Command {
        self.publishes = true;
        self
    }

    /// It acts on jobs its caller holds, by their tokens: the field `holder`.
    pub const fn holder(mut self) -> Command {
        self.holder = true;
        self
    }

    pub const fn summary(mut self, summary: &'static str) -> Command {
        self.summary = summary;
        self
    }

    pub const fn complexity(mut self, complexity: &'static str) -> Command {
        self.complexity = complexity;
        self
    }

    /// The server's command flags.
    pub fn flags(&self) -> String {
        let mut f = vec![match self.does {
            Does::Read => "readonly",
            Does::Write => "write",
            Does::Create => "write deny-oom",
        }];
        if self.group == Group::Admin {
            f.push("admin deny-script");
        }
        if self.fast {
            f.push("fast");
        }
        if self.anytime {
            f.push("allow-loading allow-stale");
        }
        if self.publishes {
            f.push("getchannels-api");
        }
        f.join(" ")
    }

    /// The ACL categories, beyond those the server derives from the flags.
    pub fn acl(&self) -> String {
        let mut a = Vec::new();
        if self.group == Group::Emq {
            a.push("emq");
        }
        a.push(if self.does == Does::Read { "read" } else { "write" });
        if self.group == Group::Admin {
            a.push("admin dangerous slow");
        }
        if self.fast {
            a.push("fast");
        }
        a.join(" ")
    }
}

impl Command {
    /// The position of the declared key with this role.
    pub fn position(&self, role: KeyRole) -> Option<usize> {
        self.keys.position(role)
    }

    /// The argv position of the channel the command publishes on, when it declares one
    /// (flag `getchannels-api`): the bus key, whose name is its channel. The server then asks
    /// the command for it and judges it with the command and the keys, by one selector.
    pub fn channel(&self) -> Option<usize> {
        if self.publishes {
            self.position(KeyRole::Queue(crate::keyspace::Role::Bus)).map(|i| i.saturating_add(2))
        } else {
            None
        }
    }

    /// The arguments after the keys, as the synopsis writes them.
    pub fn args_synopsis(&self) -> String {
        self.args.iter().map(Arg::synopsis).collect::<Vec<_>>().join(" ")
    }

    /// The synopsis, as the reference page shows it.
    pub fn synopsis(&self) -> String {
        let mut s = self.name.to_owned();
        if self.form == Form::Keys {
            s.push_str(&format!(" {}", self.keys.len()));
            for k in self.keys {
                match k.role {
                    KeyRole::Version => s.push_str(" {emq}:version"),
                    KeyRole::Any => s.push_str(" key"),
                    KeyRole::OneOf(_) => s.push_str(" emq:{Q}:<set>"),
                    KeyRole::Queue(r) if r.suffixed() => s.push_str(&format!(" emq:{{Q}}:{}<ID>", r.word())),
                    KeyRole::Queue(r) => s.push_str(&format!(" emq:{{Q}}:{}", r.word())),
                }
            }
            if let Some(t) = self.tail {
                let k = format!("emq:{{Q}}:{}{}", t.role.word(), if t.role.suffixed() { "<ID>" } else { "" });
                s.push_str(&format!(" n {k} [{k} ...]"));
            }
        }
        let args = self.args_synopsis();
        if !args.is_empty() {
            s.push(' ');
            s.push_str(&args);
        }
        s
    }

    /// The arity registered with the server. Permissive (-1): every shape error is the
    /// module's own EMQSHAPE, which names what the command takes (the server's arity error
    /// would not). A command with a tail needs at least its count's position: its key spec
    /// reads `n` at a fixed index before the module runs, and the server reads that index
    /// without checking it is there, so a shorter call gets the server's arity error.
    pub fn arity(&self) -> i32 {
        match (self.form, self.tail) {
            (Form::Keys, Some(_)) => {
                i32::try_from(self.keys.len()).map_or(-1, |n| n.saturating_add(3).saturating_neg())
            }
            _ => -1,
        }
    }

    /// The shape refusal for arguments that are not the command's.
    pub fn usage(&self) -> Refusal {
        let args = self.args_synopsis();
        Refusal::Shape(if args.is_empty() {
            format!("{} takes no arguments after its keys", self.name)
        } else {
            format!("{} takes {args}", self.name)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: Arg = block(
        "backoff",
        Some("BACKOFF"),
        &[one_of("kind", None, &[word("FIXED"), word("EXP")]), val("ms", Ty::Int)],
    )
    .optional();

    #[test]
    fn every_key_role_has_its_own_index() {
        let mut roles: Vec<KeyRole> = crate::keyspace::Role::ALL.iter().map(|r| KeyRole::Queue(*r)).collect();
        roles.extend([KeyRole::Version, KeyRole::Any, KeyRole::OneOf(&[])]);
        let mut seen: Vec<usize> = roles.iter().map(|r| r.index()).collect();
        assert!(seen.iter().all(|&i| i < KeyRole::COUNT));
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), roles.len(), "two roles share an index");
    }

    #[test]
    fn synopses_read_like_the_reference_page() {
        assert_eq!(opt("priority", "PRIORITY", "p", Ty::Int).synopsis(), "[PRIORITY p]");
        assert_eq!(flag("lifo", "LIFO").synopsis(), "[LIFO]");
        assert_eq!(BACKOFF.synopsis(), "[BACKOFF FIXED|EXP ms]");
        const PAIRS: Arg = block("pair", None, &[val("id", Ty::Str), val("token", Ty::Str)]).multiple();
        assert_eq!(PAIRS.synopsis(), "id token [id token ...]");
        const TAKE: Arg = block(
            "take",
            None,
            &[val("token", Ty::Str), val("lease_ms", Ty::Int), opt("count", "COUNT", "n", Ty::Int)],
        );
        const MODE: Arg = one_of("mode", None, &[TAKE, word("PAUSE"), word("RESUME")]);
        assert_eq!(MODE.synopsis(), "token lease_ms [COUNT n] | PAUSE | RESUME");
    }
}
