//! Copies of bytes that another thread may be writing at the same time: byte-wise atomic loads
//! and stores with relaxed ordering, the semantics C++'s P1478 (`atomic_load_per_byte_memcpy`)
//! and Rust's RFC 3301 give a seqlock's data. A plain copy racing with a write is a data race,
//! undefined behaviour in Rust's memory model even when the reader throws the copy away; these
//! copies are atomic, so the race is defined and the seqlock's fences order them.
//!
//! On x86-64 a copy is one `rep movsb` in inline assembly: every byte it moves is a single-copy
//! atomic load and store on that architecture, so the block is exactly a sequence of relaxed
//! byte-wise atomic accesses, at memcpy's speed (fast-string microcode on every x86-64 CPU of
//! the last decade). Elsewhere, and under Miri, it is word-wise relaxed atomics.
//!
//! Every access to bytes that a reader without the lock may copy goes through here: the
//! seqlock's reads, and the lock holder's writes to published slots.

/// Copies `len` bytes from `src`, which other threads may be storing to through [`store`], to
/// `dst`, as byte-wise relaxed atomic loads.
///
/// # Safety
/// `src..src + len` is readable and `dst..dst + len` writable for the whole copy, and `dst`
/// is not read or written by anyone else meanwhile.
#[inline]
pub unsafe fn load(src: *const u8, dst: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: the caller's contract; `rep movsb` reads `src..src + len` and writes
    // `dst..dst + len`, forwards (the direction flag is clear on entry to an asm block).
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rcx") len => _,
            inout("rsi") src => _,
            inout("rdi") dst => _,
            options(nostack, preserves_flags)
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    // SAFETY: the caller's contract.
    unsafe {
        words(src, dst, len)
    }
}

/// Copies `len` bytes from `src` to `dst`, which readers may be loading from through [`load`]
/// at the same time, as byte-wise relaxed atomic stores.
///
/// # Safety
/// As [`load`], with the roles swapped: `src` is not written meanwhile, and `dst` is written
/// by no one else (its writers hold the shard's lock).
#[inline]
pub unsafe fn store(src: *const u8, dst: *mut u8, len: usize) {
    // The same instruction: each byte moved is an atomic load of `src` and store to `dst`.
    // SAFETY: the caller's contract.
    unsafe { load(src, dst, len) }
}

/// The portable copy: relaxed atomic loads and stores, a word at a time where both sides are
/// aligned, a byte at a time elsewhere.
///
/// # Safety
/// As [`load`].
#[cfg_attr(all(target_arch = "x86_64", not(miri)), allow(dead_code))]
unsafe fn words(src: *const u8, dst: *mut u8, len: usize) {
    use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
    let mut at = 0;
    if (src as usize) % 8 == (dst as usize) % 8 {
        // SAFETY (all below): inside the caller's ranges, at the alignment each type needs.
        while at < len && !(src as usize + at).is_multiple_of(8) {
            let byte = unsafe { AtomicU8::from_ptr(src.add(at) as *mut u8) }.load(Relaxed);
            unsafe { AtomicU8::from_ptr(dst.add(at)) }.store(byte, Relaxed);
            at += 1;
        }
        while at + 8 <= len {
            let word = unsafe { AtomicU64::from_ptr(src.add(at) as *mut u64) }.load(Relaxed);
            unsafe { AtomicU64::from_ptr(dst.add(at) as *mut u64) }.store(word, Relaxed);
            at += 8;
        }
    }
    while at < len {
        let byte = unsafe { AtomicU8::from_ptr(src.add(at) as *mut u8) }.load(Relaxed);
        unsafe { AtomicU8::from_ptr(dst.add(at)) }.store(byte, Relaxed);
        at += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_and_alignment() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
        for offset in 0..9 {
            for len in [0, 1, 7, 8, 9, 63, 64, 65, 200] {
                let mut fast = vec![0u8; 300];
                let mut portable = vec![0u8; 300];
                unsafe {
                    load(src.as_ptr().add(offset), fast.as_mut_ptr().add(3), len);
                    words(src.as_ptr().add(offset), portable.as_mut_ptr().add(3), len);
                }
                assert_eq!(&fast[3..3 + len], &src[offset..offset + len]);
                assert_eq!(fast, portable);
                assert!(fast[..3].iter().chain(&fast[3 + len..]).all(|&b| b == 0));
            }
        }
    }
}
