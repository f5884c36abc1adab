"""A tiny inventory service: stock levels per SKU, reservations and restocking."""


class OutOfStock(Exception):
    """Raised when a reservation asks for more than is available."""


class Inventory:
    """Stock levels by SKU. Reservations hold stock until they are committed or released."""

    def __init__(self):
        self.stock = {}
        self.reserved = {}

    def restock(self, sku, quantity):
        """Adds `quantity` units of `sku`."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self.stock[sku] = self.stock.get(sku, 0) + quantity

    def available(self, sku):
        """Units of `sku` that can still be reserved."""
        return self.stock.get(sku, 0) - self.reserved.get(sku, 0)

    def reserve(self, sku, quantity):
        """Holds `quantity` units of `sku`; raises OutOfStock if not enough are available."""
        if quantity > self.available(sku):
            raise OutOfStock(sku)
        self.reserved[sku] = self.reserved.get(sku, 0) + quantity

    def release(self, sku, quantity):
        """Returns reserved units to the available stock."""
        held = self.reserved.get(sku, 0)
        self.reserved[sku] = max(0, held - quantity)

    def commit(self, sku, quantity):
        """Ships reserved units: they leave both the reservation and the stock."""
        self.release(sku, quantity)
        self.stock[sku] = self.stock.get(sku, 0) + quantity
