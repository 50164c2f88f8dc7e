//! Capture analyzer (see issue 3).
