package sockexp

// sockNets returns the systems of rdmakit's sock package (net.Conn over
// remote-memory rings) that the experiments measure next to the
// baselines, with the URI schemes they listen and dial on registered
// with RegisterScheme. It returns none while the sock package is not in
// the module: the experiments then measure the baselines alone and say
// so in their notes.
func sockNets() []network { return nil }
