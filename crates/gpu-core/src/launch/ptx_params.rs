//! A kernel's parameters read from PTX text, for an image that is PTX (no
//! cubin, so no `.nv.info` table): the `.param` list of its `.entry`, each
//! parameter's size from its type and, for an array, its length. PTX is
//! what the driver compiles from, so the list is the launch's layout.
//!
//! A parameter is `.param [.attributes] .TYPE [.ptr .SPACE] [.align N] NAME
//! [ [LEN] ]`; only the type and the length decide the size.

use super::param_table::ParamSlot;

/// Bytes of one element of a PTX type, or `None` for a word that is not one.
fn type_size(word: &str) -> Option<usize> {
    Some(match word {
        ".u8" | ".s8" | ".b8" => 1,
        ".u16" | ".s16" | ".b16" | ".f16" | ".bf16" => 2,
        ".u32" | ".s32" | ".b32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".u64" | ".s64" | ".b64" | ".f64" => 8,
        _ => return None,
    })
}

/// Whether `image` is PTX text rather than a binary image.
pub(crate) fn is_ptx(image: &[u8]) -> bool {
    let head = &image[..image.len().min(4096)];
    std::str::from_utf8(head).is_ok_and(|t| t.contains(".version") || t.contains(".entry"))
}

/// `kernel`'s parameters from the PTX `image`; `None` when the image does
/// not define that entry or its list cannot be read here (then only the
/// driver can say).
pub(crate) fn ptx_params(image: &[u8], kernel: &str) -> Option<Vec<ParamSlot>> {
    let text = std::str::from_utf8(image).ok()?;
    let at = text.match_indices(".entry").find_map(|(at, _)| {
        let rest = text[at + ".entry".len()..].trim_start();
        let name_end = rest.find(|c: char| c == '(' || c.is_whitespace())?;
        (rest[..name_end] == *kernel).then_some(&rest[name_end..])
    })?;
    let rest = at.trim_start();
    // An entry without a list has no parameters.
    let Some(list) = rest.strip_prefix('(') else {
        return Some(Vec::new());
    };
    let list = &list[..list.find(')')?];
    let mut slots = Vec::new();
    let mut offset = 0usize;
    for param in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let words: Vec<&str> = param.split_whitespace().collect();
        if words.first() != Some(&".param") {
            return None;
        }
        let element = words.iter().find_map(|w| type_size(w))?;
        let align = words
            .iter()
            .position(|w| *w == ".align")
            .and_then(|i| words.get(i + 1)?.parse::<usize>().ok())
            .unwrap_or(element);
        let name = words.last()?;
        let len = match name.find('[') {
            Some(open) => name[open + 1..name.len().checked_sub(1)?]
                .parse::<usize>()
                .ok()?,
            None => 1,
        };
        let size = element.checked_mul(len)?;
        if align == 0 || !align.is_power_of_two() {
            return None;
        }
        offset = offset.checked_next_multiple_of(align)?;
        slots.push(ParamSlot { offset, size });
        offset = offset.checked_add(size)?;
    }
    Some(slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
.version 7.0
.target sm_70
.address_size 64

.visible .entry add_f32(
    .param .u64 add_f32_param_0,
    .param .u64 .ptr .global .align 4 add_f32_param_1,
    .param .u64 add_f32_param_2,
    .param .u32 add_f32_param_3
)
{
    ret;
}

.visible .entry by_value(
    .param .align 4 .b8 by_value_param_0[12],
    .param .u8 by_value_param_1,
    .param .f64 by_value_param_2
)
{
    ret;
}

.visible .entry no_params()
{
    ret;
}
"#;

    fn sizes(kernel: &str) -> Option<Vec<usize>> {
        ptx_params(PTX.as_bytes(), kernel).map(|s| s.iter().map(|p| p.size).collect())
    }

    #[test]
    fn entries_give_their_sizes_and_offsets() {
        assert!(is_ptx(PTX.as_bytes()));
        assert_eq!(sizes("add_f32"), Some(vec![8, 8, 8, 4]));
        assert_eq!(sizes("by_value"), Some(vec![12, 1, 8]));
        let offsets: Vec<usize> = ptx_params(PTX.as_bytes(), "by_value")
            .unwrap()
            .iter()
            .map(|p| p.offset)
            .collect();
        assert_eq!(offsets, [0, 12, 16]);
        assert_eq!(sizes("no_params"), Some(vec![]));
    }

    #[test]
    fn an_entry_not_there_or_a_list_not_read_is_none() {
        assert_eq!(sizes("add"), None, "a prefix of a name is not the name");
        assert_eq!(sizes("missing"), None);
        for damaged in [
            ".entry k(\n.param .u64 a,\n",
            ".entry k(\n.reg .u64 a\n)",
            ".entry k(\n.param .vec a\n)",
            ".entry k(\n.param .b8 a[x]\n)",
            ".entry k(\n.param .align 3 .b8 a[4]\n)",
            ".entry k(\n.param .b8 a[99999999999999999999]\n)",
        ] {
            assert_eq!(ptx_params(damaged.as_bytes(), "k"), None, "{damaged}");
        }
        assert!(!is_ptx(b"\x50\xed\x55\xba\x01\x00\x10\x00"));
    }
}
