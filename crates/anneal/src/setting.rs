//! Settings read from environment variables ([`choose`]): one parser for
//! every engine switch (`KILN_ANNEAL_TC_TILE`, `KILN_ANNEAL_MEMBERS`,
//! `KILN_ANNEAL_FUSE`), so that all take their values the same way and
//! refuse the others in the same one line.

use crate::error::AnnealError;

/// The setting `var` read from its environment variable's `value`: the
/// choice whose name matches it (case and surrounding blanks aside), the
/// first choice when it is unset or blank, else [`AnnealError::BadSetting`]
/// naming `expected`, the values it takes.
pub(crate) fn choose<T: Copy>(
    var: &'static str,
    value: Option<&str>,
    choices: &[(&str, T)],
    expected: &'static str,
) -> Result<T, AnnealError> {
    let value = value.map(str::trim).unwrap_or_default();
    let found = if value.is_empty() {
        choices.first()
    } else {
        choices
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(value))
    };
    found
        .map(|&(_, choice)| choice)
        .ok_or_else(|| AnnealError::BadSetting {
            var,
            value: value.into(),
            expected,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_is_a_choice_or_the_first_or_an_error_naming_the_choices() {
        let choices = [("auto", 0), ("x-y", 1), ("7", 2)];
        let read = |v| choose("KILN_T", v, &choices, "auto, x-y or 7");
        assert_eq!(read(None).unwrap(), 0);
        assert_eq!(read(Some(" \n")).unwrap(), 0);
        assert_eq!(read(Some(" X-Y ")).unwrap(), 1);
        assert_eq!(read(Some("7")).unwrap(), 2);
        let err = read(Some(" on ")).unwrap_err();
        assert_eq!(err.to_string(), "KILN_T must be auto, x-y or 7, not \"on\"");
    }
}
