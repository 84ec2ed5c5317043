//! Where the figures came from: the machine's architecture, CPUs and model, and
//! the day of the run.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// Where the figures came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Machine {
    /// `uname -m`.
    pub arch: String,
    /// `nproc`.
    pub cpus: usize,
    /// `model name` of `/proc/cpuinfo`, when there is one.
    pub cpu_model: Option<String>,
    /// The day of the run, UTC, `YYYY-MM-DD`.
    pub date: String,
}

impl Machine {
    /// Reads this machine.
    pub fn detect() -> Machine {
        let arch = std::process::Command::new("uname")
            .arg("-m")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            });
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
        match &self.cpu_model {
            Some(model) => format!("{}, {} CPUs ({model}), {}", self.arch, self.cpus, self.date),
            None => format!("{}, {} CPUs, {}", self.arch, self.cpus, self.date),
        }
    }
}

/// `YYYY-MM-DD` of a count of days since 1970-01-01 (proleptic Gregorian).
pub fn civil_date(days_since_epoch: u64) -> String {
    // Howard Hinnant's days-to-civil algorithm.
    let z = days_since_epoch as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
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
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_787), "2026-11-30");
    }
}
