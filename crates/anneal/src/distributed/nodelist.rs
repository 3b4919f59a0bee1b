//! The first host of a Slurm nodelist (`SLURM_JOB_NODELIST`,
//! `SLURM_STEP_NODELIST`): Slurm writes its hosts compressed
//! (`gpu[01-04,07],cpu5`, `rack[1-2]-node[01-08]`), and rank 0 of a step
//! runs on the first host of the step's list. Only that host is built, in
//! one pass over the text: no list is expanded, so a hostile
//! `node[1-999999999]` costs what its text costs. The whole text is still
//! checked (brackets closed, ranges of digits, low before high), so a
//! damaged list is refused rather than half read.
//!
//! The maintained crates that read hostlists (`hostlist-parser`,
//! `hostlist`) return every host of the list: one of them checks this
//! parser in the tests, on lists small enough to expand.

/// Longest nodelist read (Slurm's own lists of thousands of hosts stay far
/// below it once compressed).
const MAX_LEN: usize = 1 << 20;

/// The first host of the compressed nodelist `list`, or why it is not one.
pub(crate) fn first_host(list: &str) -> Result<String, String> {
    if list.len() > MAX_LEN {
        return Err(format!("{} bytes, over {MAX_LEN}", list.len()));
    }
    let list = list.trim();
    if list.is_empty() {
        return Err("empty".into());
    }
    let mut first = String::new();
    // Index of the top-level entry being read: only entry 0 is built.
    let mut entry = 0usize;
    let mut entry_empty = true;
    let mut chars = list.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            ',' => {
                if entry_empty {
                    return Err(format!("an empty host at byte {at}"));
                }
                entry += 1;
                entry_empty = true;
            }
            '[' => {
                let start = at + 1;
                let end = list[start..]
                    .find(']')
                    .map(|i| start + i)
                    .ok_or_else(|| format!("the `[` at byte {at} is not closed"))?;
                let low = first_of_ranges(&list[start..end])
                    .map_err(|why| format!("`[{}]`: {why}", &list[start..end]))?;
                if entry == 0 {
                    first.push_str(low);
                }
                entry_empty = false;
                // Skip the group: the `]` and what it enclosed.
                while chars.next_if(|&(i, _)| i <= end).is_some() {}
            }
            ']' => return Err(format!("the `]` at byte {at} closes nothing")),
            c if c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') => {
                if entry == 0 {
                    first.push(c);
                }
                entry_empty = false;
            }
            c => return Err(format!("{c:?} at byte {at} is not part of a host name")),
        }
    }
    if entry_empty {
        return Err("it ends with a `,`".into());
    }
    Ok(first)
}

/// The first number of a bracket group's ranges (`01-04,07` gives `01`,
/// its zeros kept: Slurm pads every number of a range to its low end's
/// width), after checking every range of the group.
fn first_of_ranges(group: &str) -> Result<&str, String> {
    let mut first = None;
    for range in group.split(',') {
        let (low, high) = match range.split_once('-') {
            Some((low, high)) => (low, Some(high)),
            None => (range, None),
        };
        let number = |text: &str| -> Result<u128, String> {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{range:?} is not a number or a range of numbers"));
            }
            text.parse::<u128>()
                .map_err(|_| format!("{text} is too long a number"))
        };
        let lo = number(low)?;
        if let Some(high) = high {
            if number(high)? < lo {
                return Err(format!("{range:?} runs backwards"));
            }
        }
        first.get_or_insert(low);
    }
    first.ok_or_else(|| "empty".into())
}

#[cfg(test)]
mod tests {
    use super::first_host;
    use proptest::prelude::*;

    #[test]
    fn lists_as_slurm_writes_them() {
        for (list, host) in [
            ("gpu01", "gpu01"),
            ("gpu[01-04,07],cpu5", "gpu01"),
            ("cpu5,gpu[01-04]", "cpu5"),
            ("rack[2-3]-node[007-010].cluster", "rack2-node007.cluster"),
            ("n[9,3-4]", "n9"),
            ("node_a.x-y", "node_a.x-y"),
            (" a ", "a"),
        ] {
            assert_eq!(first_host(list).as_deref(), Ok(host), "{list}");
        }
    }

    #[test]
    fn damaged_lists_are_refused_saying_where() {
        for (list, why) in [
            ("", "empty"),
            ("a,", "ends with"),
            (",a", "empty host at byte 0"),
            ("a,,b", "empty host at byte 2"),
            ("gpu[01-04", "not closed"),
            ("gpu]01", "closes nothing"),
            ("gpu[]", "is not a number"),
            ("gpu[4-1]", "runs backwards"),
            ("gpu[a-b]", "is not a number"),
            ("gpu[1-]", "is not a number"),
            ("gpu[1,,2]", "is not a number"),
            ("gpu[[1]]", "is not a number"),
            ("a b", "' ' at byte 1"),
            ("a;rm -rf", "';'"),
            ("ok,bad[2-1]", "runs backwards"),
        ] {
            let err = first_host(list).unwrap_err();
            assert!(err.contains(why), "{list:?}: {err}");
        }
        let long = "n".repeat(super::MAX_LEN + 1);
        assert!(first_host(&long).unwrap_err().contains("over"));
        let digits = format!("n[{}]", "9".repeat(60));
        assert!(first_host(&digits).unwrap_err().contains("too long"));
    }

    /// A list of a billion hosts (or of 10^30) is read without expanding
    /// it: the first host only.
    #[test]
    fn hostile_ranges_are_not_expanded() {
        assert_eq!(first_host("node[1-999999999]").unwrap(), "node1");
        let huge = format!("n[0-{}]x[0-{}]", "9".repeat(30), "9".repeat(30));
        assert_eq!(first_host(&huge).unwrap(), "n0x0");
        let many = format!("a[{}]", vec!["1-999999"; 10_000].join(","));
        assert_eq!(first_host(&many).unwrap(), "a1");
    }

    fn group() -> impl Strategy<Value = String> {
        // Ascending ranges and single numbers, each low end padded as Slurm
        // writes it.
        prop::collection::vec((0u32..40, 0u32..4, 0usize..3), 1..4).prop_map(|ranges| {
            let parts: Vec<String> = ranges
                .into_iter()
                .map(|(low, span, zeros)| {
                    let width = low.to_string().len() + zeros;
                    if span == 0 {
                        format!("{low:0width$}")
                    } else {
                        format!("{low:0width$}-{:0width$}", low + span)
                    }
                })
                .collect();
            format!("[{}]", parts.join(","))
        })
    }

    fn host() -> impl Strategy<Value = String> {
        (
            "[a-z][a-z0-9]{0,5}",
            prop::option::of(group()),
            "[a-z0-9.-]{0,4}",
            prop::option::of(group()),
        )
            .prop_map(|(name, g1, mid, g2)| {
                let mut host = name;
                if let Some(g) = g1 {
                    host.push_str(&g);
                    host.push_str(&mid);
                    if let Some(g) = g2 {
                        host.push_str(&g);
                    }
                }
                host
            })
    }

    proptest! {
        /// The first host is the first a maintained hostlist crate expands
        /// the list to.
        #[test]
        fn first_host_is_the_expanded_lists_first(hosts in prop::collection::vec(host(), 1..4)) {
            let list = hosts.join(",");
            let expanded = hostlist_parser::parse(&list).expect("the generated list parses");
            prop_assert_eq!(first_host(&list), Ok(expanded[0].clone()), "{}", list);
        }

        /// Any text: a host or a refusal, never a panic, and a host is
        /// never longer than the text.
        #[test]
        fn any_text_is_read_or_refused(text in "[a-z0-9\\[\\],.-]{0,24}") {
            if let Ok(host) = first_host(&text) {
                prop_assert!(!host.is_empty() && host.len() <= text.len());
            }
        }
    }
}
