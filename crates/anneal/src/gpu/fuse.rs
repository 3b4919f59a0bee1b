//! Whether an iteration's statistics are combined, the anchors moved and
//! the energy tested in one launch (`anneal_combine_update`) or three
//! (`anneal_combine`, `anneal_update`, `anneal_finish`): one launch where a
//! shard is alone (nothing sums the shards' partials between the first and
//! the second) and its anchors are at most [`FUSED_MAX_D`] wide (one block
//! of the combine then holds a whole anchor, as the update's does).

use super::AnnealError;

/// `KILN_ANNEAL_FUSE`: `auto` (the default: one launch where it applies) or
/// `off` (three launches always). The same bits either way.
pub const FUSE_ENV: &str = "KILN_ANNEAL_FUSE";

/// The widest anchors [`Fuse::Auto`] updates in the combine's launch: the
/// combine's 128 columns a block.
pub const FUSED_MAX_D: u32 = 128;

/// [`FUSE_ENV`]'s setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fuse {
    /// One launch where it applies.
    Auto,
    /// Three launches.
    Off,
}

impl Fuse {
    /// [`FUSE_ENV`]'s value (unset, empty or `auto`: [`Fuse::Auto`]);
    /// anything else is an error naming the values it takes.
    pub fn from_env(value: Option<&str>) -> Result<Self, AnnealError> {
        let choices = [("auto", Self::Auto), ("off", Self::Off)];
        crate::setting::choose(FUSE_ENV, value, &choices, "auto or off")
    }

    /// Whether a shard that is `alone` fuses an iteration of `m` anchors
    /// of dimension `d` (the fused kernel needs a block for the finish).
    pub fn fuses(self, alone: bool, m: u32, d: u32) -> bool {
        self == Self::Auto && alone && m >= 1 && d <= FUSED_MAX_D
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_reads_auto_and_off_and_refuses_the_rest() {
        assert_eq!(Fuse::from_env(None).unwrap(), Fuse::Auto);
        assert_eq!(Fuse::from_env(Some(" ")).unwrap(), Fuse::Auto);
        assert_eq!(Fuse::from_env(Some("AUTO")).unwrap(), Fuse::Auto);
        assert_eq!(Fuse::from_env(Some(" off ")).unwrap(), Fuse::Off);
        let err = Fuse::from_env(Some("on")).unwrap_err();
        assert!(err.to_string().contains(FUSE_ENV), "{err}");
        assert!(err.to_string().contains("auto or off"), "{err}");
    }

    #[test]
    fn only_a_lone_shard_of_narrow_anchors_fuses() {
        assert!(Fuse::Auto.fuses(true, 256, 128));
        assert!(Fuse::Auto.fuses(true, 1, 1));
        assert!(!Fuse::Auto.fuses(false, 256, 128), "shards sum between");
        assert!(!Fuse::Auto.fuses(true, 256, 129), "two column blocks");
        assert!(!Fuse::Auto.fuses(true, 0, 128), "no block to finish");
        assert!(!Fuse::Off.fuses(true, 256, 128));
    }
}
