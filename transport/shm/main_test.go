package shm_test

import "os"

var pid = os.Getpid()
