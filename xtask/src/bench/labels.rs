//! How the tables and the chart write counts and ratios (`2^28`, `18.45x`),
//! in one place so that both print the same text.

/// `2^28` for powers of two from 2^10 on, else the number.
pub(crate) fn count_label(n: u64) -> String {
    if n.is_power_of_two() && n >= 1 << 10 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// `18.45x`.
pub(crate) fn times_label(r: f64) -> String {
    format!("{r:.2}x")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(count_label(1 << 28), "2^28");
        assert_eq!(count_label(1000), "1000");
        assert_eq!(count_label(512), "512");
        assert_eq!(times_label(18.4454), "18.45x");
    }
}
