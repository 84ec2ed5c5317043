//! Connecting to the local moto server (being written).
