//! Tests of the anneal index.
