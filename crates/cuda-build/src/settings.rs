//! On/off switches read from the environment (`KILN_CACHE`, `<P>_CUDA`,
//! `<P>_REQUIRE_CUDA`), parsed one way for all: a documented set of words,
//! any case; anything else is refused in one line, so that `KILN_CACHE=OFF`
//! or `=disabled` cannot leave a switch in the state the user did not ask
//! for.

use crate::error::Error;

/// The words a switch accepts, for messages and docs.
pub(crate) const SWITCH_WORDS: &str = "on/off, true/false, 1/0, yes/no (any case)";

/// The value of switch `var`: `None` when unset or empty, else on or off.
pub(crate) fn switch(var: &str) -> Result<Option<bool>, Error> {
    match std::env::var(var) {
        Ok(value) => parse_switch(var, &value),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(value)) => Err(refusal(var, &value.to_string_lossy())),
    }
}

/// `value` of switch `var` as on (`Some(true)`) or off; empty is unset.
pub(crate) fn parse_switch(var: &str, value: &str) -> Result<Option<bool>, Error> {
    let word = value.trim().to_ascii_lowercase();
    match word.as_str() {
        "" => Ok(None),
        "on" | "true" | "1" | "yes" => Ok(Some(true)),
        "off" | "false" | "0" | "no" => Ok(Some(false)),
        _ => Err(refusal(var, value)),
    }
}

fn refusal(var: &str, value: &str) -> Error {
    Error::Setting {
        var: var.to_string(),
        value: value.to_string(),
        problem: "is not an on/off value".to_string(),
        fix: format!("write one of {SWITCH_WORDS}, or unset {var}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_accept_the_documented_words_in_any_case_and_refuse_the_rest() {
        for (value, expected) in [
            ("", None),
            ("  ", None),
            ("on", Some(true)),
            ("ON", Some(true)),
            (" True ", Some(true)),
            ("1", Some(true)),
            ("Yes", Some(true)),
            ("off", Some(false)),
            ("OFF", Some(false)),
            ("False", Some(false)),
            ("0", Some(false)),
            ("NO", Some(false)),
        ] {
            assert_eq!(
                parse_switch("KILN_CACHE", value).unwrap(),
                expected,
                "{value:?}"
            );
        }
        for value in [
            "disabled", "enable", "2", "o", "offf", "n", "-1", "on off", "０",
        ] {
            let error = parse_switch("KILN_CACHE", value).unwrap_err().to_string();
            assert_eq!(
                error,
                format!(
                    "KILN_CACHE={value}: is not an on/off value; write one of on/off, \
                     true/false, 1/0, yes/no (any case), or unset KILN_CACHE"
                )
            );
        }
    }
}
