// Package migrationstest holds what the tests of migrations and
// migrations/picrew share: the golden JSON view of a store's projections
// and the fixture helpers. It may import projections because only tests
// import it.
package migrationstest
