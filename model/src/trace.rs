//! A state and a path as the checker prints them.

use std::fmt::Write as _;

use kafka_coordination_core::machine::Command;

use crate::system::{Action, Io, State, Txn};

/// One line per member and one for the broker: a state as a trace prints it.
pub fn summary(s: &State) -> String {
    let mut out = format!("t={:>2}", s.now);
    for (i, m) in s.members.iter().enumerate() {
        let status = match &m.cand {
            None => "down".to_string(),
            Some(c) => format!("{:?}", c.status()),
        };
        let io = match &m.io {
            Io::Idle => "-".to_string(),
            Io::Request(c) => format!("req {}", command_name(c)),
            Io::InTxn { offset } => format!("txn@{offset}"),
            Io::Reply(e) => format!("reply {}", e.name()),
        };
        let _ = write!(
            out,
            " | m{i}{}: {status}{}{}{} io={io}",
            if m.clock != 0 {
                format!("(+{})", m.clock)
            } else {
                String::new()
            },
            m.leads
                .map(|t| format!(" leads e{}", t.producer_epoch))
                .unwrap_or_default(),
            if m.paused { " PAUSED" } else { "" },
            if m.delayed { " DELAYED" } else { "" },
        );
    }
    let b = &s.broker;
    let _ = write!(
        out,
        " | coord e{} {:?} | log:",
        b.epoch.map_or("-".to_string(), |e| e.to_string()),
        b.txn
    );
    for (o, e) in b.log.iter().enumerate() {
        let kind = match (&e.pair, &e.value) {
            (Some(p), Some(_)) => format!("L(m{},e{})", e.by, p.producer_epoch),
            (Some(p), None) => format!("L-(m{},e{})", e.by, p.producer_epoch),
            (None, Some(_)) => format!("R(m{})", e.by),
            (None, None) => format!("R-(by m{})", e.by),
        };
        let txn = match e.txn {
            Txn::Committed => "",
            Txn::Open => "?",
            Txn::Aborted => "x",
        };
        let _ = write!(out, " {o}:{kind}{txn}");
    }
    out
}

fn command_name(c: &Command) -> &'static str {
    match c {
        Command::Append { value: None, .. } => "Append(tombstone)",
        Command::Append { .. } => "Append",
        Command::ReadPartition {
            wait_until: Some(_),
            ..
        } => "ReadPartition(long poll)",
        Command::ReadPartition { .. } => "ReadPartition",
        Command::DescribeRole { .. } => "DescribeRole",
        Command::AcquireEpoch { .. } => "AcquireEpoch",
        Command::WriteLease { value: None, .. } => "WriteLease(tombstone)",
        Command::WriteLease { .. } => "WriteLease",
        Command::Elected { .. } => "Elected",
        Command::Deposed { .. } => "Deposed",
        Command::Ended { .. } => "Ended",
    }
}

/// A counterexample path, one line per step.
pub fn trace(path: stateright::Path<State, Action>) -> String {
    let mut out = String::new();
    for (state, action) in path.into_vec() {
        let _ = writeln!(out, "{}", summary(&state));
        if let Some(a) = action {
            let _ = writeln!(out, "    --> {a:?}");
        }
    }
    out
}
