//! What Git for Windows reports about its own process besides the ancestry: whether a
//! debugger was attached at startup (`data` `windows/debugger_present`) and, right
//! before every `exit`, the process's peak memory use (`data_json` `windows/memory`).
//! Both lines have category `process`; other platforms' git writes neither.
//!
//! The memory value is a compact JSON object with three of `PROCESS_MEMORY_COUNTERS`'
//! fields in git's order: `{"PageFaultCount":…,"PeakWorkingSetSize":…,"PeakPagefileUsage":…}`.

/// Whether a user-mode debugger is attached to this process (`IsDebuggerPresent`).
#[cfg(windows)]
pub fn debugger_present() -> bool {
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn IsDebuggerPresent() -> i32;
    }
    // SAFETY: takes no argument and only reads this process's PEB.
    unsafe { IsDebuggerPresent() != 0 }
}

/// The three counters of Git for Windows' `windows/memory` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakMemory {
    /// Page faults so far.
    pub page_fault_count: u64,
    /// The largest working set so far, in bytes.
    pub peak_working_set_size: u64,
    /// The largest commit charge (private bytes) so far, in bytes.
    pub peak_pagefile_usage: u64,
}

impl PeakMemory {
    /// The line's value, compact, with git's keys in git's order.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"PageFaultCount\":{},\"PeakWorkingSetSize\":{},\"PeakPagefileUsage\":{}}}",
            self.page_fault_count, self.peak_working_set_size, self.peak_pagefile_usage
        )
    }
}

/// This process's counters (`K32GetProcessMemoryInfo`, kernel32's name for psapi's
/// `GetProcessMemoryInfo`), or `None` if Windows refuses them.
#[cfg(windows)]
pub fn peak_memory() -> Option<PeakMemory> {
    /// `PROCESS_MEMORY_COUNTERS`.
    #[repr(C)]
    #[derive(Default)]
    struct ProcessMemoryCounters {
        cb: u32,
        page_fault_count: u32,
        peak_working_set_size: usize,
        working_set_size: usize,
        quota_peak_paged_pool_usage: usize,
        quota_paged_pool_usage: usize,
        quota_peak_non_paged_pool_usage: usize,
        quota_non_paged_pool_usage: usize,
        pagefile_usage: usize,
        peak_pagefile_usage: usize,
    }
    type Handle = *mut std::ffi::c_void;
    #[link(name = "kernel32")]
    unsafe extern "system" {
        fn GetCurrentProcess() -> Handle;
        fn K32GetProcessMemoryInfo(
            process: Handle,
            counters: *mut ProcessMemoryCounters,
            cb: u32,
        ) -> i32;
    }
    let mut counters = ProcessMemoryCounters::default();
    let size = std::mem::size_of::<ProcessMemoryCounters>() as u32;
    // SAFETY: `counters` is a writable `PROCESS_MEMORY_COUNTERS` of `size` bytes, and the
    // pseudo handle of the current process needs no closing.
    let ok = unsafe { K32GetProcessMemoryInfo(GetCurrentProcess(), &mut counters, size) };
    (ok != 0).then(|| PeakMemory {
        page_fault_count: u64::from(counters.page_fault_count),
        peak_working_set_size: counters.peak_working_set_size as u64,
        peak_pagefile_usage: counters.peak_pagefile_usage as u64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_value_has_gits_keys_in_gits_order() {
        let value = PeakMemory {
            page_fault_count: 1,
            peak_working_set_size: 2,
            peak_pagefile_usage: 3,
        }
        .to_json();
        assert_eq!(
            value,
            r#"{"PageFaultCount":1,"PeakWorkingSetSize":2,"PeakPagefileUsage":3}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&value).expect("JSON");
        assert_eq!(parsed["PeakPagefileUsage"], 3);
    }

    #[cfg(windows)]
    #[test]
    fn this_process_has_counters() {
        let memory = peak_memory().expect("the counters of this process");
        // Wine counts no page faults (0 there); the working set is never empty.
        assert!(memory.peak_working_set_size > 0);
        assert!(memory.peak_pagefile_usage > 0);
    }
}
