"""The control plane: placement, reconciliation and the facility it places into."""
