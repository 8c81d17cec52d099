"""The pages a person reads: the dry run's review, the timeline of months, the concept graph."""
