"""The node agent: what a machine has (discovery), the engine processes it runs, and how it
talks to the control plane."""
