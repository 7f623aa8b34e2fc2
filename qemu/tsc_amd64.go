package qemu

const haveTSC = true

// rdtsc reads the CPU's time-stamp counter (tsc_amd64.s).
func rdtsc() uint64
