"""Text laid out for people: aligned text tables that wrap within a width, Markdown tables, and
the wrapping of prose they use. Shared by the commands' reports (plan; preflight and verify may
adopt it), which sit side by side in the layers and so cannot share code of their own. Pure: it
imports nothing of fmcluster, prints nothing."""
