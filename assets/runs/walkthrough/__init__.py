"""The six run configurations of the reference walkthrough (`analyse demo`)."""
