//! Request limits: the defaults (README, "Limits"), the server's effective set, and a request's
//! optional tightening of them.

use serde::{Deserialize, Serialize};

/// Default input cap: 20 MiB.
pub const DEFAULT_MAX_INPUT_BYTES: u64 = 20 * 1024 * 1024;
/// Default filter cap: 64 KiB.
pub const DEFAULT_MAX_FILTER_BYTES: u64 = 64 * 1024;
/// Default input nesting cap.
pub const DEFAULT_MAX_DEPTH: u32 = 1_000;
/// Default output cap, counted on the final text including array framing.
pub const DEFAULT_MAX_OUTPUT_BYTES: u64 = 100_000;
/// Default wall-clock deadline per request.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// Default heap allowance above the worker's baseline.
pub const DEFAULT_MAX_HEAP_BYTES: u64 = 256 * 1024 * 1024;

/// The limits one request runs under. The server has one set (from its config); a request's
/// [`LimitOverrides`] may lower any of them, never raise them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Largest inline input, in bytes.
    pub max_input_bytes: u64,
    /// Longest filter text, in bytes.
    pub max_filter_bytes: u64,
    /// Deepest nesting of arrays and objects in the input.
    pub max_depth: u32,
    /// Largest output text, in bytes, array framing included.
    pub max_output_bytes: u64,
    /// Wall-clock deadline, in milliseconds.
    pub timeout_ms: u64,
    /// Heap allowance above the worker's baseline, in bytes (kernel-enforced).
    pub max_heap_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_input_bytes: DEFAULT_MAX_INPUT_BYTES,
            max_filter_bytes: DEFAULT_MAX_FILTER_BYTES,
            max_depth: DEFAULT_MAX_DEPTH,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_heap_bytes: DEFAULT_MAX_HEAP_BYTES,
        }
    }
}

/// A request's tightening of the server's limits. `None` keeps the server's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitOverrides {
    /// Lower output cap, in bytes.
    #[serde(default)]
    pub max_output_bytes: Option<u64>,
    /// Shorter wall-clock deadline, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Lower input nesting cap.
    #[serde(default)]
    pub max_depth: Option<u32>,
}

/// A request asked for more than the server allows, or for zero.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("requested {name} of {requested} is {}", if *.requested == 0 { format!("not a limit; ask for at most the server's {allowed}, or leave it out") } else { format!("above the server's {allowed}") })]
pub struct OverrideError {
    /// Which limit.
    pub name: &'static str,
    /// What the request asked for.
    pub requested: u64,
    /// The server's value.
    pub allowed: u64,
}

impl Limits {
    /// The limits a request runs under: these, lowered by `overrides`. Asking for more than
    /// the server allows, or for zero, is an error rather than a silent clamp, so a caller
    /// never believes it has a limit it does not have.
    pub fn tightened(&self, overrides: &LimitOverrides) -> Result<Limits, OverrideError> {
        fn pick(name: &'static str, server: u64, asked: Option<u64>) -> Result<u64, OverrideError> {
            match asked {
                None => Ok(server),
                Some(v) if v == 0 || v > server => Err(OverrideError {
                    name,
                    requested: v,
                    allowed: server,
                }),
                Some(v) => Ok(v),
            }
        }
        let depth = pick(
            "max_depth",
            u64::from(self.max_depth),
            overrides.max_depth.map(u64::from),
        )?;
        Ok(Limits {
            max_output_bytes: pick(
                "max_output_bytes",
                self.max_output_bytes,
                overrides.max_output_bytes,
            )?,
            timeout_ms: pick("timeout_ms", self.timeout_ms, overrides.timeout_ms)?,
            // `depth` came from a u32 and is at most the server's u32 value.
            max_depth: u32::try_from(depth).unwrap_or(self.max_depth),
            ..*self
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_only_lower() {
        let server = Limits::default();
        let lower = LimitOverrides {
            max_output_bytes: Some(10),
            timeout_ms: Some(100),
            max_depth: Some(5),
        };
        let got = server.tightened(&lower).unwrap();
        assert_eq!(got.max_output_bytes, 10);
        assert_eq!(got.timeout_ms, 100);
        assert_eq!(got.max_depth, 5);
        assert_eq!(got.max_input_bytes, server.max_input_bytes);

        let higher = LimitOverrides {
            timeout_ms: Some(server.timeout_ms + 1),
            ..Default::default()
        };
        let err = server.tightened(&higher).unwrap_err();
        assert_eq!(err.name, "timeout_ms");
        assert_eq!(
            err.to_string(),
            "requested timeout_ms of 5001 is above the server's 5000"
        );

        let zero = LimitOverrides {
            max_output_bytes: Some(0),
            ..Default::default()
        };
        assert_eq!(
            server.tightened(&zero).unwrap_err().to_string(),
            "requested max_output_bytes of 0 is not a limit; ask for at most the server's 100000, or leave it out"
        );
    }
}

/// `n` with thousands separators, as error messages print limits: `20,971,520`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod grouped_tests {
    #[test]
    fn groups_thousands() {
        assert_eq!(super::grouped(0), "0");
        assert_eq!(super::grouped(999), "999");
        assert_eq!(super::grouped(1000), "1,000");
        assert_eq!(super::grouped(20_971_520), "20,971,520");
    }
}
