//! linerate-load: the load generator engine (work in progress, issue B).
