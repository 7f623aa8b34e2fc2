package bwrap_test

// providerName is the provider these tests run; the shared scenarios and test
// support are in package internal/providertest.
const providerName = "bwrap"
