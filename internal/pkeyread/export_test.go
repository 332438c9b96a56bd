package pkeyread

// ErrMADStatus is errMADStatus for the package's external tests.
var ErrMADStatus = errMADStatus
