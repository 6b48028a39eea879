# Sourced by hack/test.sh and hack/prebuild.sh: one Go build configuration
# for everything `make test` builds without the race detector.
#
# The images, Kubernetes, containerd, helm and kubectl are built static and
# with -trimpath (CGO_ENABLED=0), and both settings are part of the cache key
# of every package above net. Building vet's packages, the test binaries and
# the binaries the tests build the same way lets them all reuse one compile
# of client-go, the API types and the rest, instead of a second one that
# differs only in those two settings. Race builds need cgo: they run as
# `CGO_ENABLED=1 go test -race` (see $race below), and share their own cache.
export CGO_ENABLED=0
case " $(go env GOFLAGS) " in
  *" -trimpath "*) ;;
  *) GOFLAGS="$(go env GOFLAGS) -trimpath"; export GOFLAGS="${GOFLAGS# }" ;;
esac
race=(env CGO_ENABLED=1 go test -race)
