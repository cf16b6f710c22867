//! An idle pane host lets go of its program's pages.
//!
//! A pane host maps its executable's code and read-only data as the kernel faults them in,
//! and each fault maps its neighbours too (fault-around), so after start-up and a burst of
//! output most of the executable is mapped in the process, and counted in its resident size,
//! though an idle pane host runs none of it. Those pages are the page cache's, one copy shared
//! by every pane host; unmapping them from one process frees nothing but its page-table
//! entries and the count. [`release`] drops this process's mappings of them (`MADV_DONTNEED`
//! on the executable's read-only segments), so an idle pane host's resident size is what it
//! holds itself; the next burst maps back what it runs, from the page cache.
//!
//! Only segments the loader mapped read-only are released: their pages are never written, so
//! the file's contents are what they hold. The segment holding relocated data (RELRO, made
//! read-only after relocation) is part of a writable segment and is left alone. A process
//! being traced is left alone too: a debugger's breakpoints are private copies of code pages,
//! which releasing would throw away.

/// The executable's read-only segments, as page-aligned address ranges.
#[cfg(target_os = "linux")]
fn read_only_segments() -> Vec<(usize, usize)> {
    use std::ffi::c_void;

    /// Called by `dl_iterate_phdr` for each loaded object, the program first: collects the
    /// program's loadable segments that are not writable, and stops.
    unsafe extern "C" fn program(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Vec` `read_only_segments` passed, alive and not otherwise
        // borrowed during the call; `info` points to a valid `dl_phdr_info` for the call.
        let (segments, info) = unsafe { (&mut *data.cast::<Vec<(usize, usize)>>(), &*info) };
        if info.dlpi_phdr.is_null() {
            return 1;
        }
        // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers of the loaded object,
        // mapped for as long as the object is (the program: always).
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        for header in headers {
            if header.p_type == libc::PT_LOAD && header.p_flags & libc::PF_W == 0 {
                let start = (info.dlpi_addr as usize).wrapping_add(header.p_vaddr as usize);
                segments.push((start, start.wrapping_add(header.p_memsz as usize)));
            }
        }
        // Non-zero: the program was the first object; no other is looked at.
        1
    }

    let mut segments: Vec<(usize, usize)> = Vec::new();
    // SAFETY: `program` only reads what `dl_iterate_phdr` hands it and writes to `segments`,
    // which outlives the call.
    unsafe {
        libc::dl_iterate_phdr(
            Some(program),
            (&mut segments as *mut Vec<(usize, usize)>).cast::<c_void>(),
        );
    }
    let page = page_size();
    segments
        .into_iter()
        .map(|(start, end)| {
            (
                start & !(page - 1),
                end.saturating_add(page - 1) & !(page - 1),
            )
        })
        .filter(|(start, end)| start < end)
        .collect()
}

#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: `sysconf` reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .unwrap_or(4096)
}

/// Whether a debugger (or any tracer) is attached to this process.
#[cfg(target_os = "linux")]
fn traced() -> bool {
    std::fs::read_to_string("/proc/self/status").map_or(true, |status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("TracerPid:"))
            .is_none_or(|pid| pid.trim() != "0")
    })
}

/// Drops this process's mappings of its executable's read-only pages (see the module's
/// documentation); the bytes released from its resident size, as far as it can tell (0 when
/// nothing was done).
#[cfg(target_os = "linux")]
pub fn release() -> usize {
    if traced() {
        return 0;
    }
    let mut released = 0;
    for (start, end) in read_only_segments() {
        // SAFETY: the range is a read-only segment of this program's own image, page-aligned
        // (segments do not share pages, having different protections). Its pages were never
        // written, so `MADV_DONTNEED` only unmaps them: the next access maps the same bytes
        // from the file again. No reference into them is invalidated.
        let done = unsafe {
            libc::madvise(
                start as *mut std::ffi::c_void,
                end - start,
                libc::MADV_DONTNEED,
            )
        };
        if done == 0 {
            released += end - start;
        }
    }
    released
}

#[cfg(not(target_os = "linux"))]
pub fn release() -> usize {
    0
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn rss_file_kb() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|line| line.strip_prefix("RssFile:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }

    /// The program's code and read-only data are found, released, and the program goes on
    /// running the code it let go of (a parser, formatting, allocation) with the same results.
    #[test]
    fn the_programs_read_only_pages_are_released_and_run_again() {
        let segments = read_only_segments();
        let here = the_programs_read_only_pages_are_released_and_run_again as fn() as usize;
        assert!(
            segments.iter().any(|&(s, e)| (s..e).contains(&here)),
            "this function's code at {here:#x} is in no read-only segment: {segments:x?}"
        );
        let before_work = serde_json::json!({"a": [1, 2, 3], "b": "text"}).to_string();
        let before = rss_file_kb();
        if traced() {
            return;
        }
        let released = release();
        let after = rss_file_kb();
        assert!(released > 0);
        assert!(
            after < before,
            "RssFile {before} kB before the release, {after} kB after"
        );
        let after_work = serde_json::json!({"a": [1, 2, 3], "b": "text"}).to_string();
        assert_eq!(before_work, after_work);
    }
}
