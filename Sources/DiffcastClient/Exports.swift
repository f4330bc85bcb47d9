@_exported import DiffcastCore
@_exported import DiffcastWire
