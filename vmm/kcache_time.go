package vmm

import "time"

// fileNow is time.Now, a variable so tests can order cache entries.
var fileNow = time.Now
