//! kiln's safe, typed GPU API (see issue 3).
