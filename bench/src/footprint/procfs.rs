//! What `/proc` tells about a function process (CPU time, peak memory) and about
//! the machine the figures came from.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// CPU time a process has used so far, two ways.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTime {
    /// `utime + stime` of `/proc/PID/stat`, in clock ticks (threads that exited
    /// included).
    pub ticks: u64,
    /// Σ over the live threads of the first field of `/proc/PID/task/*/schedstat`:
    /// nanoseconds on a CPU, exact where the ticks are 10 ms steps.
    pub sched_ns: u64,
}

impl CpuTime {
    /// Reads process `pid`; zeros when it is gone.
    pub fn of(pid: u32) -> CpuTime {
        CpuTime {
            ticks: stat_ticks(pid).unwrap_or(0),
            sched_ns: sched_ns(pid),
        }
    }

    /// Milliseconds from `before` to `self`, from the ticks (`clk_tck` a second).
    pub fn ticks_ms_since(&self, before: &CpuTime, clk_tck: u64) -> f64 {
        self.ticks.saturating_sub(before.ticks) as f64 * 1000.0 / clk_tck.max(1) as f64
    }

    /// Milliseconds from `before` to `self`, from schedstat.
    pub fn sched_ms_since(&self, before: &CpuTime) -> f64 {
        self.sched_ns.saturating_sub(before.sched_ns) as f64 / 1e6
    }
}

/// `utime + stime` (fields 14 and 15) of `/proc/PID/stat`.
fn stat_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after it are plain.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state), so field N is fields[N - 3].
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

fn sched_ns(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|text| text.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Peak resident memory (`VmHWM` of `/proc/PID/status`), in KiB.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmHWM:")
}

/// Resident memory now (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_field(pid, "VmRSS:")
}

fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(name))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
}

/// Clock ticks per second: `getconf CLK_TCK`, else 100 (Linux's usual value).
pub fn clock_ticks() -> (u64, &'static str) {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .map_or((100, "assumed 100 (getconf failed)"), |t| {
            (t, "from getconf CLK_TCK")
        })
}

/// Where the figures came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// `uname -m`.
    pub arch: String,
    /// `nproc`.
    pub cpus: usize,
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Day of the run, UTC (`YYYY-MM-DD`).
    pub date: String,
}

impl Machine {
    /// Reads this machine.
    pub fn detect() -> Machine {
        let run = |program: &str, args: &[&str]| {
            Command::new(program)
                .args(args)
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let arch = run("uname", &["-m"]).unwrap_or_else(|| std::env::consts::ARCH.to_owned());
        let cpus = run("nproc", &[])
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown CPU".to_owned());
        let days = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400);
        Machine {
            arch,
            cpus,
            cpu_model,
            date: civil_date(days),
        }
    }

    /// `x86_64, 2 CPUs (model), 2026-11-30`.
    pub fn label(&self) -> String {
        format!(
            "{}, {} CPUs ({}), {}",
            self.arch, self.cpus, self.cpu_model, self.date
        )
    }
}

/// `YYYY-MM-DD` of a count of days since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_date(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(20_454), "2026-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
    }

    #[test]
    fn this_process_has_cpu_time_and_memory() {
        let pid = std::process::id();
        let before = CpuTime::of(pid);
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        let after = CpuTime::of(pid);
        assert!(after.sched_ns > before.sched_ns);
        assert!(peak_rss_kib(pid).unwrap() > 0);
        assert!(rss_kib(pid).unwrap() > 0);
        assert!(clock_ticks().0 > 0);
    }
}
