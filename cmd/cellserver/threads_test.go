package main

import "testing"

func TestThreadsFor(t *testing.T) {
	for _, tt := range []struct {
		others float64
		most   int
		want   int
	}{
		{0, 2, 2},     // a machine to itself: one thread per processor
		{0.3, 2, 2},   // light neighbours
		{0.95, 2, 1},  // a load generator on one of two processors
		{1.9, 2, 1},   // never fewer than one
		{5, 2, 1},     // figures above the processors' count
		{3.2, 16, 13}, // a busy large machine
		{0, 1, 1},     // one processor
		{-0.5, 4, 4},  // never more than at start
	} {
		if got := threadsFor(tt.others, tt.most); got != tt.want {
			t.Errorf("threadsFor(%v, %d) = %d, want %d", tt.others, tt.most, got, tt.want)
		}
	}
}
