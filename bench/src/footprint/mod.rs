//! The cost of an ask as the history grows (being written).
