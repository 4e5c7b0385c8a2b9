//! Every error text the module replies, in one place.

use crate::algo::ParamError;
use std::ffi::{CStr, CString};

/// An error reply: a constant, or a message built on the (cold) error path.
#[derive(Debug)]
pub enum Error {
    /// Redis's own "wrong number of arguments" reply.
    Arity,
    Static(&'static CStr),
    Owned(CString),
}

// Any command.
pub const NOT_INTEGER: &CStr = c"ERR value is not an integer or out of range";
pub const SYNTAX: &CStr = c"ERR syntax error";
pub const WRONGTYPE: &CStr = c"WRONGTYPE Operation against a key holding the wrong kind of value";
pub const INTERNAL: &CStr = c"ERR internal error in the ratelimit module (the server is fine)";

// RL.CLOCK.
pub const CLOCK_DISABLED: &CStr =
    c"ERR RL.CLOCK is disabled: load the module with ratelimit.test-clock yes";
pub const CLOCK_RANGE: &CStr = c"ERR time must be between 0 and 10000000000000 ms";
pub const CLOCK_SUBCOMMAND: &CStr =
    c"ERR unknown subcommand: try RL.CLOCK GET | SET unix_ms | ADVANCE ms | REAL";

// RL._APPLY.
pub const APPLY_INTERNAL: &CStr =
    c"ERR RL._APPLY is internal: only accepted from the primary link or the AOF";
pub const APPLY_PAYLOAD: &CStr = c"ERR RL._APPLY payload is not a valid ratelimit state";

// Every write (`txn.rs`).
pub const STORE: &CStr = c"ERR the server did not store the key's new state (nothing was spent)";

// RL.RELEASE, RL.RENEW.
pub const TOKEN: &CStr = c"ERR token must be of the form <unix_ms>-<seq>";

// RL.ALL (and `Error::all_rules`).
pub const ALL_NUMKEYS: &CStr = c"ERR numkeys is greater than the number of arguments";
pub const ALL_DUPLICATE: &CStr = c"ERR RL.ALL takes each key once";

impl Error {
    pub fn as_cstr(&self) -> &CStr {
        match self {
            Error::Arity => c"ERR wrong number of arguments",
            Error::Static(s) => s,
            Error::Owned(s) => s.as_c_str(),
        }
    }

    fn owned(msg: String) -> Error {
        CString::new(msg).map_or(Error::Static(INTERNAL), Error::Owned)
    }

    /// An error built on the error path (its text starts with the error code).
    pub fn text(msg: String) -> Error {
        Error::owned(msg)
    }

    /// A policy's rule that names no algorithm: names them, from the algorithm table.
    pub fn policy_rules() -> Error {
        let names: Vec<String> = crate::algo::table::ALGOS
            .iter()
            .map(|a| a.name.to_ascii_uppercase())
            .collect();
        Error::owned(format!(
            "ERR a policy's rule starts with its algorithm: {}",
            names.join(", ")
        ))
    }

    /// RL.ALL without a rule for a key: names the rules it takes, from the algorithm table
    /// (`ERR RL.ALL needs one rule per key: GCRA, TOKENBUCKET, ... or QUEUE`).
    pub fn all_rules() -> Error {
        let names: Vec<String> = crate::algo::table::ALGOS
            .iter()
            .filter(|a| a.in_all)
            .map(|a| a.name.to_ascii_uppercase())
            .collect();
        let list = match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        Error::owned(format!("ERR RL.ALL needs one rule per key: {list}"))
    }

    /// A key holding a ratelimit state of another algorithm.
    pub fn other_algorithm(name: &str) -> Error {
        Error::owned(format!(
            "WRONGTYPE key holds a ratelimit state of another algorithm ({name})"
        ))
    }
}

impl From<&'static CStr> for Error {
    fn from(s: &'static CStr) -> Error {
        Error::Static(s)
    }
}

impl From<ParamError> for Error {
    fn from(e: ParamError) -> Error {
        Error::owned(match e {
            ParamError::Syntax => return Error::Static(SYNTAX),
            ParamError::NotInteger => return Error::Static(NOT_INTEGER),
            ParamError::NotPositive(name) => format!("ERR {name} must be a positive integer"),
            ParamError::SpanTooLarge(name) => {
                format!("ERR {name} must be at most {}", crate::algo::MAX_SPAN_MS)
            }
            ParamError::AtMost(name, max) => format!("ERR {name} must be at most {max}"),
            ParamError::Negative(name) => format!("ERR {name} must not be negative"),
            ParamError::TooLarge(what) => format!("ERR parameters too large: {what}"),
            ParamError::CostAboveLimit(name) => format!("ERR COST must not exceed {name}"),
            ParamError::OptionAbove(opt, name) => format!("ERR {opt} must not exceed {name}"),
            ParamError::OptionBelow(opt, name) => format!("ERR {opt} must be less than {name}"),
            ParamError::AboveConfig(name, max, config) => {
                format!("ERR {name} must be at most {max} (config {config})")
            }
        })
    }
}
