"""The control plane: placement, reconciliation and the facility it places into, by
role: pure decisions (`decisions`), the runtime that feeds them and carries them out
(`runtime`), and its rows in the store (`tables`)."""
