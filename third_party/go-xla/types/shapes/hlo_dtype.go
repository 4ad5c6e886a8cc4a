package shapes
