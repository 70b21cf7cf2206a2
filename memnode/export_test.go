package memnode

// DeviceURI is deviceURI, for tests.
var DeviceURI = deviceURI
