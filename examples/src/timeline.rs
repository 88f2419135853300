//! [`Timeline`]: where the examples print, with an elapsed-time stamp on every event.

use std::fmt::Display;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kafka_coordination::core::UnixMillis;
use kafka_coordination::Clock;

#[derive(Debug)]
enum Sink {
    Stdout,
    Buffer(Vec<u8>),
}

/// A shared, line-oriented printer. Lines of events carry a stamp: the time elapsed since the
/// timeline was created ([`event`](Self::event)), real or by a clock given with
/// [`on_clock`](Self::on_clock), or a time the caller gives ([`event_at`](Self::event_at)).
///
/// Cloning shares the sink, so threads can print to one timeline; every line is written whole.
/// Tests use [`Timeline::buffer`] and read the text back with [`contents`](Self::contents).
#[derive(Clone)]
pub struct Timeline {
    start: Instant,
    /// When stamps come from a clock (virtual time): the clock and its reading at the start.
    clock: Option<(Arc<dyn Clock>, UnixMillis)>,
    sink: Arc<Mutex<Sink>>,
}

impl std::fmt::Debug for Timeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timeline")
            .field("elapsed", &self.elapsed())
            .field("sink", &self.sink)
            .finish()
    }
}

impl Timeline {
    /// A timeline that prints to standard output.
    pub fn stdout() -> Timeline {
        Timeline::with(Sink::Stdout)
    }

    /// A timeline that keeps its text in memory (see [`contents`](Self::contents)).
    pub fn buffer() -> Timeline {
        Timeline::with(Sink::Buffer(Vec::new()))
    }

    fn with(sink: Sink) -> Timeline {
        Timeline {
            start: Instant::now(),
            clock: None,
            sink: Arc::new(Mutex::new(sink)),
        }
    }

    /// A timeline on the same output whose stamps are `clock`'s time since now (for a
    /// [`ManualClock`](kafka_coordination::ManualClock): virtual time).
    pub fn on_clock(&self, clock: Arc<dyn Clock>) -> Timeline {
        let now = clock.now();
        Timeline {
            start: Instant::now(),
            clock: Some((clock, now)),
            sink: self.sink.clone(),
        }
    }

    /// Time elapsed since the timeline was created: real, or by its clock.
    pub fn elapsed(&self) -> Duration {
        match &self.clock {
            Some((clock, start)) => clock.now().since(*start),
            None => self.start.elapsed(),
        }
    }

    /// The text printed so far, for a [`buffer`](Self::buffer) timeline (empty for stdout).
    pub fn contents(&self) -> String {
        match &*self.lock() {
            Sink::Buffer(b) => String::from_utf8_lossy(b).into_owned(),
            Sink::Stdout => String::new(),
        }
    }

    /// Prints `text` as it is (headers, summaries).
    pub fn note(&self, text: impl Display) {
        self.write(&format!("{text}\n"));
    }

    /// Prints an event of `who`, stamped with the time elapsed.
    pub fn event(&self, who: &str, what: impl Display) {
        self.event_at(self.elapsed(), who, what);
    }

    /// Prints an event of `who`, stamped with `at` (for example virtual time).
    pub fn event_at(&self, at: Duration, who: &str, what: impl Display) {
        self.write(&format!("{} {who:<9} {what}\n", stamp(at)));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, line: &str) {
        match &mut *self.lock() {
            Sink::Stdout => {
                let mut out = std::io::stdout().lock();
                // A closed pipe (`| head`) must not turn into a panic.
                let _ = out.write_all(line.as_bytes());
                let _ = out.flush();
            }
            Sink::Buffer(b) => b.extend_from_slice(line.as_bytes()),
        }
    }
}

/// `[  1.234s]`: the stamp of an event at `at`.
pub fn stamp(at: Duration) -> String {
    format!("[{:>7.3}s]", at.as_secs_f64())
}

/// `+1.234s`: an instant given as an offset from a start, in seconds with milliseconds.
pub fn offset(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "+" };
    let ms = ms.unsigned_abs();
    format!("{sign}{}.{:03}s", ms / 1000, ms % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_stamps_and_offsets() {
        assert_eq!(stamp(Duration::from_millis(1234)), "[  1.234s]");
        assert_eq!(offset(2_005), "+2.005s");
        assert_eq!(offset(-40), "-0.040s");
        let t = Timeline::buffer();
        t.event_at(Duration::ZERO, "node-1", "elected");
        t.note("done");
        assert_eq!(t.contents(), "[  0.000s] node-1    elected\ndone\n");
    }
}
