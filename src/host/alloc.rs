//! The module's allocator: the server's (so module memory shows in `used_memory` and counts
//! toward `maxmemory`) once the server has handed its API over, the system's before that and
//! in processes without a server (unit tests, tools linking the rlib). Inside the server the
//! API is set before the module's first allocation, so one allocator serves every pointer.

use std::alloc::{GlobalAlloc, Layout, System};

use valkey_module::alloc::ValkeyAlloc;

pub struct Alloc;

fn served() -> bool {
    api!(RedisModule_Alloc).is_some()
}

// SAFETY: both allocators are sound; the choice is fixed for a process's whole life (see
// the module comment), so memory is always freed by the allocator that gave it.
unsafe impl GlobalAlloc for Alloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if served() {
            unsafe { ValkeyAlloc.alloc(layout) }
        } else {
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if served() {
            unsafe { ValkeyAlloc.alloc_zeroed(layout) }
        } else {
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if served() {
            unsafe { ValkeyAlloc.dealloc(ptr, layout) }
        } else {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if served() {
            unsafe { ValkeyAlloc.realloc(ptr, layout, new_size) }
        } else {
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }
}
