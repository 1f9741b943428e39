//! Numbers as jq 1.6 writes them: the shortest digits that read back as the same double, in
//! plain notation unless the exponent is far from the digits, with a signed exponent of at
//! least two digits (`1e-05`, `1e+17`, `0.0002`, `1.7976931348623157e+308`). NaN is `null`
//! and the infinities are the largest finite doubles, as in jq.
//!
//! Integers are the one intended difference: jaq keeps an integer's digits exact (a literal
//! or integer arithmetic), and jqjail writes those digits, where jq 1.6 would write the
//! nearest double (`12345678901234567890` → `12345678901234567000`).

use jaq_json::Num;
use std::fmt::Write;

/// Appends `n` as jq writes it.
pub fn write_num(out: &mut String, n: &Num) {
    match n {
        Num::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Num::BigInt(i) => {
            let _ = write!(out, "{i}");
        }
        Num::Float(x) => write_f64(out, *x),
        // A decimal literal (never an integer: jaq reads those as integers) denotes a double.
        Num::Dec(text) => write_f64(out, text.parse().unwrap_or(f64::NAN)),
    }
}

/// `n` as jq writes it.
pub fn num_text(n: &Num) -> String {
    let mut out = String::new();
    write_num(&mut out, n);
    out
}

/// Appends a double as jq 1.6's `jvp_dtoa_fmt` writes it.
pub fn write_f64(out: &mut String, x: f64) {
    if x.is_nan() {
        out.push_str("null");
        return;
    }
    let x = x.clamp(-f64::MAX, f64::MAX);
    if x.is_sign_negative() {
        out.push('-');
    }
    if x == 0.0 {
        out.push('0');
        return;
    }
    // Rust's `{:e}` gives the shortest round-tripping digits: `d.ddde±N`.
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().expect("`{:e}` writes a decimal exponent");
    // The decimal point's position relative to the digits, as dtoa reports it.
    let decpt = exp + 1;
    let n = digits.len() as i32;
    if decpt <= -4 || decpt > n + 15 {
        out.push_str(&digits[..1]);
        if n > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        let _ = write!(out, "e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else if decpt >= n {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
    } else {
        out.push_str(&digits[..decpt as usize]);
        out.push('.');
        out.push_str(&digits[decpt as usize..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f64) -> String {
        let mut s = String::new();
        write_f64(&mut s, x);
        s
    }

    /// Each pair is what jq 1.6 printed for the double (`jq -n`).
    #[test]
    fn doubles_print_as_jq_prints_them() {
        for (x, jq) in [
            (1000.0, "1000"),
            (5.0, "5"),
            (1e-5, "1e-05"),
            (1e17, "1e+17"),
            (1e16, "1e+16"),
            (1e300, "1e+300"),
            (123456789012.0, "123456789012"),
            (0.1 + 0.2, "0.30000000000000004"),
            (-0.0, "-0"),
            (1e19, "1e+19"),
            (1e20, "1e+20"),
            (f64::INFINITY, "1.7976931348623157e+308"),
            (f64::NEG_INFINITY, "-1.7976931348623157e+308"),
            (f64::NAN, "null"),
            (1e-7, "1e-07"),
            (0.00001234, "1.234e-05"),
            (12345678901234567890.0, "12345678901234567000"),
            (110.0, "110"),
            (2e-4, "0.0002"),
            (1.5, "1.5"),
            (-3.25, "-3.25"),
            (0.001, "0.001"),
            (5e-324, "5e-324"),
        ] {
            assert_eq!(f(x), jq, "{x:e}");
        }
    }
}
