//! Time passing in a run: the functions' clock (the offset file they read), the
//! stand-in's cache clock, and when the scheduled sweep runs within a gap.

/// The scheduled sweep's period (`template.yaml`: `rate(15 minutes)`).
pub const SWEEP_PERIOD_SECONDS: u64 = 15 * 60;

/// How long into a gap a sweep can still find a pause fold due: an hour's
/// entries expire an hour after the round, and the next tick comes within a
/// period. Later ticks find nothing due (the next due time is the session's
/// idle timeout, which no gap reaches), so the benchmark skips them.
pub const FOLD_HORIZON_SECONDS: u64 = 3600 + SWEEP_PERIOD_SECONDS;

/// The times (seconds on the benchmark's clock) at which the scheduled sweep
/// runs within a gap of `gap` seconds starting at `from`: every multiple of the
/// period strictly inside the gap, up to [`FOLD_HORIZON_SECONDS`] into it.
pub fn sweep_ticks(from: u64, gap: u64) -> Vec<u64> {
    let end = from + gap.min(FOLD_HORIZON_SECONDS);
    let first = (from / SWEEP_PERIOD_SECONDS + 1) * SWEEP_PERIOD_SECONDS;
    (0..)
        .map(|n| first + n * SWEEP_PERIOD_SECONDS)
        .take_while(|&tick| tick < end && tick < from + gap)
        .collect()
}

/// The file the functions' clock reads its offset from (`CLOCK_OFFSET_FILE`):
/// the seconds the benchmark has moved time forward, removed with the run.
pub(super) struct ClockOffset {
    path: std::path::PathBuf,
    /// The seconds moved so far.
    pub(super) seconds: u64,
}

impl ClockOffset {
    /// A clock at offset 0, its file written.
    pub(super) fn new() -> ClockOffset {
        let path = std::env::temp_dir().join(format!(
            "degrau-bench-clock-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        let offset = ClockOffset { path, seconds: 0 };
        offset.write();
        offset
    }

    /// The file's path, for `CLOCK_OFFSET_FILE`.
    pub(super) fn path_string(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }

    /// Moves the clock `seconds` forward.
    pub(super) fn advance(&mut self, seconds: u64) {
        self.seconds += seconds;
        self.write();
    }

    /// Written whole to a temporary file and renamed, so a reading never sees
    /// half a number. A clock that did not move would make every gap after it
    /// wrong: panics.
    fn write(&self) {
        let partial = self.path.with_extension("partial");
        let written = std::fs::write(&partial, self.seconds.to_string())
            .and_then(|()| std::fs::rename(&partial, &self.path));
        if let Err(error) = written {
            panic!("the functions' clock did not move: {error}");
        }
    }
}

impl Drop for ClockOffset {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Moves the stand-in's cache clock (time passing between two messages). A
/// clock that did not move would make every figure after it wrong: panics.
pub(super) async fn advance_clock(standin_url: &str, seconds: u64) {
    let answer = reqwest::Client::new()
        .post(format!("{standin_url}/stand-in/clock"))
        .json(&serde_json::json!({ "advance_seconds": seconds }))
        .send()
        .await
        .and_then(reqwest::Response::error_for_status);
    if let Err(error) = answer {
        panic!("the stand-in's clock did not move: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_runs_at_its_period_within_the_fold_horizon() {
        // A gap from 100 s to 2,100 s holds the ticks at 900 and 1,800.
        assert_eq!(sweep_ticks(100, 2_000), [900, 1_800]);
        // A tick at the gap's end is the turn's own time: not in the gap.
        assert_eq!(sweep_ticks(0, 900), Vec::<u64>::new());
        assert!(sweep_ticks(10, 30).is_empty());
        // A next-day gap: only the ticks within the horizon.
        let night = sweep_ticks(0, 20 * 3600);
        assert_eq!(night, [900, 1_800, 2_700, 3_600]);
        assert!(night.iter().all(|&t| t < FOLD_HORIZON_SECONDS));
    }
}
