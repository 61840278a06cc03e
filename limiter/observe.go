package limiter

// WithObserver makes the limiter call f with every decision of a request
// that matched some limit, after it is made, on the caller's goroutine (so
// f must be quick and safe for concurrent use). The shadow report uses it
// to see would-denies.
func WithObserver(f func(Decision)) Option { return func(l *Limiter) { l.observe = f } }
