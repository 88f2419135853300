//! Running the checker over a configuration, and the figures it reports.

use std::fmt;
use std::time::Duration;

use stateright::{Checker, HasDiscoveries, Model};

use crate::model::CoordinationModel;
use crate::scenario::Config;
use crate::trace::trace;

/// The figures of one run.
#[derive(Clone, Debug)]
pub struct Figures {
    /// States generated.
    pub states: usize,
    /// Distinct states.
    pub unique: usize,
    /// The longest path explored.
    pub depth: usize,
    /// Wall time.
    pub elapsed: Duration,
    /// Property name and counterexample trace, for each property that failed.
    pub failures: Vec<(&'static str, String)>,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} states ({} unique), depth {}, {:.1?}",
            self.states, self.unique, self.depth, self.elapsed
        )?;
        for (name, _) in &self.failures {
            write!(f, "; FAILED: {name}")?;
        }
        Ok(())
    }
}

/// How a run searches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Search {
    /// Depth-first over every state: little memory (the visited set holds fingerprints).
    Exhaustive,
    /// Breadth-first, stopping at the first counterexample of the named property: the shortest
    /// trace.
    FirstFailure(&'static str),
}

/// Runs the check of `cfg` on `threads` threads to completion (or, for
/// [`Search::FirstFailure`], until the property fails).
pub fn check(cfg: Config, threads: usize, search: Search) -> Figures {
    let started = std::time::Instant::now();
    let model = CoordinationModel::new(cfg);
    let names: Vec<&'static str> = model.properties().iter().map(|p| p.name).collect();
    let builder = model.checker().threads(threads);
    let mut figures = match search {
        Search::Exhaustive => figures_of(&builder.spawn_dfs().join(), &names),
        Search::FirstFailure(name) => {
            let finished = builder
                .finish_when(HasDiscoveries::AnyOf([name].into_iter().collect()))
                .spawn_bfs()
                .join();
            figures_of(&finished, &names)
        }
    };
    figures.elapsed = started.elapsed();
    figures
}

/// What a finished search found: its counts and a trace for each of `names` that failed.
fn figures_of(checker: &impl Checker<CoordinationModel>, names: &[&'static str]) -> Figures {
    Figures {
        states: checker.state_count(),
        unique: checker.unique_state_count(),
        depth: checker.max_depth(),
        elapsed: Duration::ZERO,
        failures: names
            .iter()
            .filter_map(|&n| checker.discovery(n).map(|p| (n, trace(p))))
            .collect(),
    }
}
