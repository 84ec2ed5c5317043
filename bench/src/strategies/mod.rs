//! Context strategies side by side (being written).
