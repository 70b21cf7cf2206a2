package nic

import "github.com/rdmakit/rdmakit/verbs"

// prismFlags are the PRISM flags a QP of type t accepts.
func prismFlags(t verbs.QPType) verbs.SendFlags {
	if t == verbs.RC {
		return verbs.FlagIndirect | verbs.FlagBounded | verbs.FlagConditional | verbs.FlagIndirectArg | verbs.FlagRedirect
	}
	return 0
}
