"""autotune.problems: problem kinds (what a test point is, its data, reference, roofline, baseline)."""
