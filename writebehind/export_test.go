package writebehind

// Sleeping reports whether Run sleeps until the next Mark (nothing was
// pending after its last flush).
func (w *Writer) Sleeping() bool { return w.idle.Load() }
