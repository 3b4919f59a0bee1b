//! PyTorch's figures as its anchor script prints them: a JSON object of
//! named numbers (`copy_GBps`, `torch_kmeans30_10000x128x256_ms`, ...),
//! kept as printed and read by name where a comparison needs one.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

/// The anchor script's object, as printed.
pub(crate) type TorchFigures = BTreeMap<String, serde_json::Value>;

/// The number under `key`, where there are figures and it is one.
pub(crate) fn number(torch: Option<&TorchFigures>, key: &str) -> Option<f64> {
    torch?.get(key)?.as_f64()
}

/// Parses the PyTorch anchor's output: a JSON object with numbers in it.
pub(crate) fn parse(text: &str) -> Result<TorchFigures> {
    let figures: TorchFigures = serde_json::from_str(text)?;
    if !figures.values().any(serde_json::Value::is_number) {
        bail!("a JSON object with no numbers in it");
    }
    Ok(figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_output_must_be_an_object_of_numbers() {
        assert!(parse("[1, 2]").is_err());
        assert!(parse(r#"{"a": "b"}"#).is_err());
        let figures = parse(r#"{"copy_GBps": 1.5, "device": "H100"}"#).unwrap();
        assert_eq!(number(Some(&figures), "copy_GBps"), Some(1.5));
        assert_eq!(number(Some(&figures), "device"), None);
        assert_eq!(number(None, "copy_GBps"), None);
    }
}
