//! Recording files: writer and reader (in progress).
